"""The registry of protocol modes: one line per mode (docs/architecture.md, "Adding an overlay").

Each entry names the module holding the mode's `Mode` (`pubsub.kernel.contracts`) as its
``MODE``.  The modules are imported by name when a mode is first asked for, so everything
that serves every mode -- the CLI core, the node and supervisor daemons, `pubsub cluster`,
the experiment runner, the simulator -- depends on this registry and the contracts, never
on a mode's packages.  The overlays (modes whose `Mode.overlay` is set) are what
``--overlay`` chooses from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pubsub.kernel.contracts import Mode, Overlay

MODE_MODULES = (
    "pubsub.modes.skipring",  # the skip ring (paper 000): the default mode
    "broker.mode",  # SCOT brokers, OctopiA and the PADRES-style baseline (paper 002)
    "pubsub.clique.mode",  # the clique: every member a neighbour of every other (the baseline)
    "pubsub.tco.mode",  # a topic-connected overlay kept by the supervisor (paper 001)
    "pubsub.omen.mode",  # a topic-connected overlay mended by coordinators (paper 003), not self-stabilizing
)

#: The overlay the daemons and the simulator run unless told otherwise.
DEFAULT_OVERLAY = "skipring"


def lazy(target: str) -> Callable[..., Any]:
    """The callable ``"package.module:name"``, imported when it is first called: how a mode
    names its parts (`Mode`, `Overlay`) without importing them at registration, so that
    asking the registry costs no mode's imports."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"a lazy part is 'module:name', not {target!r}")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"`{module}.{name}`, imported on first use."
    call.lazy_target = target  # type: ignore[attr-defined]  # for tests/kernel/test_registry.py
    return call


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


def daemon_roles() -> tuple[str, ...]:
    """The roles of the registered modes' daemons, in registry order (what a cluster
    certificate's OU may name for a daemon, `pubsub.runtime.identity`)."""
    roles: dict[str, None] = {}
    for mode in all_modes():
        roles.update(dict.fromkeys(mode.daemons))
    return tuple(roles)


def role_names() -> dict[str, str]:
    """daemon role -> how an error message names it, over the registered modes (a role
    without a name of its own is called "a ROLE daemon")."""
    names: dict[str, str] = {}
    for mode in all_modes():
        for role in mode.daemons:
            names.setdefault(role, mode.role_names.get(role, f"a {role} daemon"))
    return names


def overlay_names() -> list[str]:
    """The names of the registered overlays, the default first."""
    return [mode.name for mode in all_modes() if mode.overlay is not None]


def overlay(name: str = DEFAULT_OVERLAY) -> Overlay:
    """The registered overlay called `name`; UnknownMode (naming the choices) otherwise."""
    for mode in all_modes():
        if mode.name == name and mode.overlay is not None:
            return mode.overlay
    raise UnknownMode(f"no overlay {name!r}; registered: {', '.join(overlay_names())}")
