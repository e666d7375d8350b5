"""Messages, effects and references: the vocabulary every core and runtime shares.

Cores exchange plain slotted dataclasses derived from `Message`; each is registered under
its wire name with the `message` decorator, so that the codec (`pubsub.kernel.wire`) can
validate every field of every message from the annotations alone, whatever mode defined it.
A core's effects are `Send` tuples: deliver this message to that reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple, NewType, TypeVar, dataclass_transform

#: A daemon's reference: the address it listens on, "host:port" (ARCHITECTURE: decisions).
Ref = NewType("Ref", str)
#: A topic name.
Topic = NewType("Topic", str)


class Message:
    """Base class of everything that travels; `kind` names it on the wire."""

    __slots__ = ()
    kind: str = ""


class Send(NamedTuple):
    """An effect of a core: deliver `msg` to the daemon whose reference is `dest`."""

    dest: Ref
    msg: Message


#: Every registered message class by its wire name.
MESSAGE_TYPES: dict[str, type[Message]] = {}

M = TypeVar("M", bound=Message)


@dataclass_transform()
def message(kind: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: a slotted dataclass message registered under its wire name
    (`dataclass_transform` tells type checkers the class becomes a dataclass)."""

    def wrap(cls: type[M]) -> type[M]:
        if kind in MESSAGE_TYPES:
            raise ValueError(f"message kind {kind!r} is registered twice")
        cls.kind = kind
        dc = dataclass(slots=True)(cls)
        MESSAGE_TYPES[kind] = dc
        return dc

    return wrap


def kinds_of(*modules: ModuleType) -> tuple[str, ...]:
    """The kinds of the messages whose classes `modules` define, sorted: e.g. those a mode's
    daemons speak (the label values their message counters report from the start)."""
    names = {module.__name__ for module in modules}
    return tuple(sorted(kind for kind, cls in MESSAGE_TYPES.items() if cls.__module__ in names))
