"""``reconciler status``'s Quota table and its JSON ``quotas`` (docs/environments.md), pure: read from the
Project status files' ``gpuQuota`` (``<ns>/projects/<name>.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.status.view import load_yaml


def quota_rows(files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """``[{namespace, family, used, quota}]`` of every Project status file, by namespace and family."""
    rows: list[dict[str, Any]] = []
    for path, data in sorted(files.items()):
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "projects" or not parts[2].endswith(".yaml"):
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, Mapping) else None
        quota = status.get("gpuQuota") if isinstance(status, Mapping) else None
        for family, use in sorted(quota.items()) if isinstance(quota, Mapping) else ():
            if (
                isinstance(use, Mapping)
                and isinstance(use.get("used"), int)
                and isinstance(use.get("quota"), int)
            ):
                rows.append(
                    {"namespace": parts[0], "family": str(family), "used": use["used"], "quota": use["quota"]}
                )
    return rows


def quota_section(rows: list[dict[str, Any]]) -> str:
    """The "Quota" table: namespace, family, used/quota ("" when no Project sets a quota)."""
    if not rows:
        return ""
    lines = [("NAMESPACE", "FAMILY", "USED/QUOTA", "")]
    for row in rows:
        over = "over quota" if row["used"] > row["quota"] else ""
        lines.append((row["namespace"], row["family"], f"{row['used']}/{row['quota']}", over))
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    body = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "Quota\n" + "\n".join(body)
