"""MIG layouts: per-GPU layouts, the exact planner for one admission, return to whole, realisation.

See docs/mig.md. Pure: no I/O, no clock. Vocabulary:

- a *placement* is ``(profile name, start)`` on a GPU's memory-slice axis; a *layout* is a set of them that
  do not overlap, start where the profile may start, stay within the GPU's slices, use at most the GPU's
  compute slices and hold at most one media-extension (``+me``) instance;
- a GPU of a pool is whole (MIG off: free, or bound whole to a workload) or in MIG mode with instances,
  each bound to a workload or free;
- *stranded* slices are the memory slices of a GPU in MIG mode that no instance covers.

The planner places one workload's MIG request ({profile: count}) without moving any bound instance,
minimising lexicographically (1) GPUs newly switched to MIG mode, (2) stranded slices over the pool, (3)
the GPUs used in (host name, GPU index) order: as many instances as possible on the first GPU, then the
next... Within a GPU it prefers the placement that leaves room for the largest profiles (small
instances go where they block no 4g), and fills what the request leaves with free instances chosen to
strand as little as possible (then most compute, fewest, lowest starts), so a GPU frozen next pass
still has free instances to offer. Method: dynamic programming over the GPUs in that order with the remaining
request as state and per-GPU option tables built from the enumerated layouts (exact; see docs/mig.md).

The package, by job (this module re-exports the public names, so ``reconciler.placement.mig`` is the one
import path): :mod:`~.state` (the pool's GPUs, plans, refusals), :mod:`~.layouts` (per-GPU layouts),
:mod:`~.options` (one GPU's options for a request), :mod:`~.planner` (one admission),
:mod:`~.search` (the planner's exact search), :mod:`~.after` (return to whole, re-padding, usage) and
:mod:`~.realise` (machine pools and mig-parted's config).
"""

from reconciler.placement.mig.after import MigUsage, mig_usage, release_idle_gpus, repad
from reconciler.placement.mig.layouts import (
    all_placements,
    is_valid_layout,
    layout_compute,
    layout_mask,
    placement_mask,
    uncovered,
    valid_layouts,
)
from reconciler.placement.mig.options import state_of, stranded_slices, usable_slices
from reconciler.placement.mig.planner import (
    describe_shortfall,
    fresh_gpus_needed,
    frozen_gpus,
    plan_mig_admission,
)
from reconciler.placement.mig.realise import MigRealisation, config_name, layout_json, realise
from reconciler.placement.mig.state import (
    ALL_DISABLED,
    MIG_CONFIG_LABEL,
    Layout,
    MigBinding,
    MigInstance,
    MigPlan,
    MigRefusal,
    MigShortfall,
    Placement,
    PoolGpu,
)

__all__ = [
    "ALL_DISABLED",
    "MIG_CONFIG_LABEL",
    "Layout",
    "MigBinding",
    "MigInstance",
    "MigPlan",
    "MigRealisation",
    "MigRefusal",
    "MigShortfall",
    "MigUsage",
    "Placement",
    "PoolGpu",
    "all_placements",
    "config_name",
    "describe_shortfall",
    "fresh_gpus_needed",
    "frozen_gpus",
    "is_valid_layout",
    "layout_compute",
    "layout_json",
    "layout_mask",
    "mig_usage",
    "placement_mask",
    "plan_mig_admission",
    "realise",
    "release_idle_gpus",
    "repad",
    "state_of",
    "stranded_slices",
    "uncovered",
    "usable_slices",
    "valid_layouts",
]
