"""Palette's API as data (pure): the endpoint paths the client calls, its search bodies, path-parameter
escaping, and the two response headers it reads (``Retry-After``, ``Date``). The HTTP itself is
:mod:`reconciler.palette.client`'s.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

EDGE_HOSTS_SEARCH = "/v1/dashboard/edgehosts/search"
CLUSTERS_SEARCH = "/v1/dashboard/spectroclusters/search"
CLUSTER = "/v1/spectroclusters/{uid}"
CLUSTER_CREATE = "/v1/spectroclusters/edge-native"
CLOUD_CONFIG = "/v1/cloudconfigs/edge-native/{configUid}"
MACHINE_POOLS = "/v1/cloudconfigs/edge-native/{configUid}/machinePools"
MACHINE_POOL = "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}"
POOL_MACHINES = MACHINE_POOL + "/machines"
POOL_MACHINE = POOL_MACHINES + "/{machineUid}"
CLUSTER_PROFILES = "/v1/spectroclusters/{uid}/profiles"
PROFILE = "/v1/clusterprofiles/{uid}"  # one profile of the catalogue (v1ClusterProfilesGet)


def string_filter(prop: str, values: list[str], *, operator: str = "eq") -> dict[str, Any]:
    """One ``v1SearchFilterItem`` on a string property (NOTES.md 2.2)."""
    return {
        "property": prop,
        "type": "string",
        "condition": {
            "string": {
                "operator": operator,
                "negation": False,
                "ignoreCase": False,
                "match": {"conjunction": "or", "values": values},
            }
        },
    }


def edge_host_search_body(tags: Mapping[str, str] | None) -> dict[str, Any]:
    """The search body for hosts carrying every given tag: one filter item per tag, ANDed.

    (Several values in one item are ORed by Palette, so "all must match" needs separate items.)
    """
    if not tags:
        return {"filter": {}, "sort": []}
    filters = [string_filter("tags", [f"{key}:{value}"]) for key, value in sorted(tags.items())]
    return {
        "filter": {"conjunction": "and", "filterGroups": [{"conjunction": "and", "filters": filters}]},
        "sort": [],
    }


def cluster_search_body() -> dict[str, Any]:
    """Every cluster that is not deleted; label filtering happens client side (server side is UNCERTAIN)."""
    return {
        "filter": {
            "conjunction": "and",
            "filterGroups": [
                {
                    "conjunction": "and",
                    "filters": [
                        {"property": "isDeleted", "type": "bool", "condition": {"bool": {"value": False}}}
                    ],
                }
            ],
        },
        "sort": [],
    }


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(when.timestamp() - current, 0.0)


def http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def quote_path(value: str) -> str:
    """Path parameters are escaped so a uid can never change the path."""
    return quote(value, safe="")
