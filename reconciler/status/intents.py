"""Write-ahead for scaling actions: the status tree that records them as intended (pure).

Before a pass writes a scaling action to Palette, it commits the status branch as it is with each
acting pool's ``status.scaling`` carrying the action's ``intent`` (``reconciler.scaling.record``): a
successor that starts after a crash (or a lost lease) between the Palette write and the pass's status
commit reads the intent as the pool's last action, so it finishes or confirms the action instead of
undoing it, and its cooldown runs from the intent (docs/scaling.md, "Write-ahead"). The pass's own
status commit replaces the intent with the action's record.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from reconciler.model.pools import PoolKey
from reconciler.scaling.record_types import ScalingStatus
from reconciler.scaling.record_yaml import render
from reconciler.status.pools import API_VERSION
from reconciler.status.render import dump, status_path

POOL_KIND = "ComputePool"


def intent_tree(
    files: Mapping[str, bytes],
    docs: Mapping[str, Mapping[str, Any]],
    blocks: Mapping[PoolKey, ScalingStatus],
) -> dict[str, bytes]:
    """``files`` (the status tree as read; ``docs`` its parsed documents) with each pool's
    ``status.scaling`` replaced by its block from ``blocks`` (one carrying an intent); every other file
    as it is."""
    out = dict(files)
    for (namespace, name), block in sorted(blocks.items()):
        path = status_path(POOL_KIND, namespace, name)
        found = docs.get(path)
        doc: dict[str, Any] = copy.deepcopy(dict(found)) if found is not None else {}
        if not doc:
            doc = {
                "apiVersion": API_VERSION,
                "kind": POOL_KIND,
                "metadata": {"namespace": namespace, "name": name},
            }
        status = doc.get("status")
        if not isinstance(status, dict):
            status = doc["status"] = {}
        status["scaling"] = render(block)
        out[path] = dump(doc)
    return out


def intent_message(blocks: Mapping[PoolKey, ScalingStatus]) -> str:
    """The intent commit's message: one line per pool, the intended action's own words."""
    lines = []
    for (namespace, name), block in sorted(blocks.items()):
        intent = block.intent
        if intent is not None:
            lines.append(f"{namespace}/{name}: {intent.action.message or intent.action.direction}")
    return "scaling intent (before the Palette write)\n\n" + "\n".join(lines) + "\n"
