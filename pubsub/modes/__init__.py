"""The protocol modes' own definitions (`MODE` of each), for the registry
(`pubsub.kernel.registry`, which lists them one line each and is what everyone asks)."""

from __future__ import annotations

from pubsub.kernel.registry import MODE_MODULES, UnknownMode, all_modes, get

__all__ = ["MODE_MODULES", "UnknownMode", "all_modes", "get"]
