"""The registry's lazy parts: every ``"module:name"`` a registered mode names exists and is
callable (a typo would otherwise surface only when that part is first used), and `lazy`
refuses a malformed target."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from pubsub.kernel import registry


def lazy_targets() -> list[tuple[str, str, str]]:
    """(mode, field, target) of every lazy part of every registered mode and overlay."""
    found = []
    for mode in registry.all_modes():
        parts = [(f.name, getattr(mode, f.name)) for f in dataclasses.fields(mode)]
        parts += [(f"daemons[{role}]", run) for role, run in mode.daemons.items()]
        if mode.overlay is not None:
            parts += [(f"overlay.{f.name}", getattr(mode.overlay, f.name)) for f in dataclasses.fields(mode.overlay)]
        found += [(mode.name, name, value.lazy_target) for name, value in parts if hasattr(value, "lazy_target")]
    return found


def test_every_lazy_part_of_every_mode_names_a_callable_that_exists() -> None:
    targets = lazy_targets()
    assert len(targets) >= 15  # the skip ring's and the clique's parts at least
    for mode, field, target in targets:
        module, _, name = target.partition(":")
        value = getattr(importlib.import_module(module), name, None)
        assert callable(value), f"{mode}.{field}: {target} is not a callable"


def test_a_lazy_part_imports_on_first_call_and_refuses_a_malformed_target() -> None:
    join = registry.lazy("os.path:join")
    assert join.__name__ == "join" and join("a", "b") == "a/b"
    for bad in ("os.path", ":join", "os.path:"):
        with pytest.raises(ValueError, match="module:name"):
            registry.lazy(bad)
