"""The registry of protocol modes: one line per mode (docs/architecture.md, "Adding a mode").

Each entry names the module holding the mode's `Mode` (`pubsub.kernel.contracts`) as its
``MODE``.  The modules are imported by name when a mode is first asked for, so the CLI
core, `pubsub cluster`, the experiment runner and the simulator entry points depend on
this registry, not on any mode's packages.
"""

from __future__ import annotations

import importlib

from pubsub.kernel.contracts import Mode

MODE_MODULES = (
    "pubsub.modes.skipring",  # the skip ring (paper 000): the default mode
    "broker.mode",  # SCOT brokers, OctopiA and the PADRES-style baseline (paper 002)
)


class UnknownMode(LookupError):
    """No registered mode has that name."""


def all_modes() -> list[Mode]:
    """Every registered mode, the default (the skip ring) first."""
    modes = []
    for name in MODE_MODULES:
        mode = importlib.import_module(name).MODE
        if not isinstance(mode, Mode):
            raise TypeError(f"{name}.MODE is not a pubsub.kernel.contracts.Mode")
        modes.append(mode)
    return modes


def get(name: str) -> Mode:
    """The registered mode called `name`; UnknownMode (naming the choices) otherwise."""
    modes = {mode.name: mode for mode in all_modes()}
    try:
        return modes[name]
    except KeyError:
        raise UnknownMode(f"no mode {name!r}; registered: {', '.join(modes)}") from None
