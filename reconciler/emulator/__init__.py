"""A local Palette API server: the reconciler's paths with Palette's shapes, state, time and faults.

It lets the client, the loop and the demo run exactly as they would against Palette, without Palette.
"""

from reconciler.emulator.app import EmulatorApp, create_app
from reconciler.emulator.faults import FaultRule, Faults, parse_rules
from reconciler.emulator.metering import Stats
from reconciler.emulator.server import EmulatorServer
from reconciler.emulator.state import EmulatorState

__all__ = [
    "EmulatorApp",
    "EmulatorServer",
    "EmulatorState",
    "FaultRule",
    "Faults",
    "Stats",
    "create_app",
    "parse_rules",
]
