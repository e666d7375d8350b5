"""What an experiment records and the limits it runs under: status checks, markers,
the progress callback and the experiment's error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds between status polls of the whole cluster.
POLL_SECONDS = 0.5
#: Seconds between two progress lines with the topics' state while the script plays.
REPORT_SECONDS = 5.0


#: Seconds of events kept after the final legitimate state, so every daemon's last
#: snapshot is rotated into place before the stop.
TAIL_SECONDS = 3.0


#: A topic counts as converged once it stays legitimate this long (the analysis' default).
STABLE_SECONDS = 0.5


#: Seconds allowed for one admin request.
ADMIN_TIMEOUT = 5.0


#: Seconds allowed for the analysis job.
ANALYSIS_TIMEOUT = 900.0


Progress = Callable[[str], None]


class ExperimentError(RuntimeError):
    """The experiment could not be played; the message is meant for the operator."""


@dataclass
class StatusCheck:
    """One poll's verdict for one topic, from the nodes' own status."""

    ts: float
    topic: str
    legitimate: bool
    members: int


@dataclass
class MarkerRecord:
    """A perturbation or scenario step as the runner issued it."""

    id: str
    action: str
    ts: float
    targets: list[str]
    topic: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
