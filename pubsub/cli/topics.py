"""Which topics a `subscribe` or `unsubscribe` names: several at once, and patterns.

An argument with ``*``, ``?`` or ``[`` in it is a shell-style pattern (`fnmatch`, case
sensitive: ``sensors.*``, ``room-?``, ``[ab]*``) unless the command was given
``--literal``; any other argument is a topic name.  Patterns are resolved when the command
runs: `subscribe` against the topics the supervisor knows (its status lists them),
`unsubscribe` against the topics the node runs; a streaming `subscribe` keeps its patterns
open and follows topics that match later (`pubsub.cli.follow`).  A pattern that matches
nothing is an error (except for a streaming `subscribe`, which waits for matching topics);
nothing is changed at the node before the whole selection is known.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PATTERN_CHARS = frozenset("*?[")


def is_pattern(text: str) -> bool:
    """Whether `text` is a pattern rather than a topic name."""
    return any(c in PATTERN_CHARS for c in text)


class SelectionError(ValueError):
    """A pattern matched nothing; the message is one line for the operator."""


@dataclass
class Selection:
    """The topics selected, in the order given (patterns' matches sorted), without repeats;
    and each pattern's matches."""

    topics: list[str] = field(default_factory=list)
    patterns: dict[str, list[str]] = field(default_factory=dict)

    def add(self, topic: str) -> None:
        if topic not in self.topics:
            self.topics.append(topic)


def patterns_in(args: Sequence[str], literal: bool) -> list[str]:
    """The arguments that are patterns (none with `literal`)."""
    return [] if literal else [a for a in args if is_pattern(a)]


def select(
    args: Sequence[str], available: Iterable[str], literal: bool, where: str, *, allow_empty: bool = False
) -> Selection:
    """Resolve `args` against the `available` topics (`where` names them in errors); with
    `allow_empty` a pattern may match nothing yet."""
    known = sorted(set(available))
    chosen = Selection()
    for arg in args:
        if literal or not is_pattern(arg):
            chosen.add(arg)
            continue
        matched = [t for t in known if fnmatch.fnmatchcase(t, arg)]
        if not matched and not allow_empty:
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise SelectionError(
                f"pattern {arg!r} matches none of {where} ({shown or 'there are none'}); "
                "give --literal to use it as a topic name"
            )
        chosen.patterns[arg] = matched
        for topic in matched:
            chosen.add(topic)
    return chosen
