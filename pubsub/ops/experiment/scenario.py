"""Scenario files for `pubsub experiment run`: a cluster, its topics and a timed script.

A scenario is YAML (validated with pydantic; every error names the field)::

    name: mass-crash
    description: a third of the subscribers crash at once
    nodes: 9                  # node processes started (the supervisor comes with them)
    interval: 0.2             # Timeout interval of every daemon, seconds
    config_budget: 1          # supervisor configurations per topic per Timeout
    seed: 7                   # picks the targets of steps that name none
    topics:
      news: 8                 # nodes 0..7 subscribe to "news" at the start
    settle: 60                # after the last step: wait at most this long for legitimacy
    steps:                    # `at` is seconds after the start of the script
      - {at: 2, action: publish, topic: news, count: 20}
      - {at: 5, action: crash, count: 3}
      - {at: 5, action: join, topic: news, count: 1}

Step actions and their fields (targets are node indexes; without ``nodes`` the runner
draws ``count`` of the eligible nodes with the scenario's seed):

``join`` / ``leave``
    subscribe non-members to / unsubscribe members from ``topic``.
``publish``
    ``count`` publications to ``topic`` through random members, ``rate`` per second at most;
    its marker is written after the last acknowledgement (from then on, every member's trie
    must come to hold everything).
``crash``
    SIGKILL of running nodes (through their admin address: `pubsub chaos crash`).
``restart``
    start crashed nodes again on their data directories, all at once; the marker is
    written when they answer again.
``corrupt_node``
    arbitrary BuildSR state on running nodes (``topic`` optional); ``count: 0`` means all.
``corrupt_supervisor``
    the four database corruptions on the supervisor (``topic`` optional).
``partition``
    the chosen nodes drop all traffic with everyone else for ``duration`` seconds.
``drop``
    the chosen nodes drop ``fraction`` of their outgoing frames for ``duration`` seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pubsub.runtime.settings import yaml_error_detail

#: Most node processes a scenario may start on one machine.
MAX_NODES = 64
#: Longest script, seconds.
MAX_SCRIPT_SECONDS = 3600.0

Action = Literal[
    "join",
    "leave",
    "publish",
    "crash",
    "restart",
    "corrupt_node",
    "corrupt_supervisor",
    "partition",
    "drop",
]
#: Steps that need no node targets.
SUPERVISOR_ACTIONS = frozenset({"corrupt_supervisor"})
TopicName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")]


class ScenarioError(ValueError):
    """The scenario file cannot be used; the message is meant for the operator."""


class Step(BaseModel):
    """One timed action of the script."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0, le=MAX_SCRIPT_SECONDS, description="seconds after the start")
    action: Action
    topic: TopicName | None = None
    count: int = Field(1, ge=0, le=10_000, description="targets or publications; 0 = all")
    nodes: tuple[int, ...] | None = Field(None, description="node indexes (default: drawn)")
    duration: float | None = Field(None, gt=0, le=MAX_SCRIPT_SECONDS)
    fraction: float | None = Field(None, gt=0, le=1)
    rate: float = Field(50.0, gt=0, le=10_000, description="publications per second at most")

    @model_validator(mode="after")
    def _fields_fit_action(self) -> Step:
        needs_topic = {"join", "leave", "publish"}
        if self.action in needs_topic and self.topic is None:
            raise ValueError(f"a {self.action} step needs a topic")
        if self.action in ("partition", "drop") and self.duration is None:
            raise ValueError(f"a {self.action} step needs a duration")
        if self.action == "drop" and self.fraction is None:
            raise ValueError("a drop step needs a fraction")
        if self.action != "drop" and self.fraction is not None:
            raise ValueError("only a drop step takes a fraction")
        if self.action not in ("partition", "drop") and self.duration is not None:
            raise ValueError("only partition and drop steps take a duration")
        if self.action == "publish" and self.nodes is not None:
            raise ValueError("a publish step goes through random members; it takes no nodes")
        if self.action in SUPERVISOR_ACTIONS and self.nodes is not None:
            raise ValueError(f"a {self.action} step targets the supervisor; it takes no nodes")
        return self

    @property
    def ends_at(self) -> float:
        """When the step's effect is over (partitions and drops last `duration`)."""
        return self.at + (self.duration or 0.0)


class Scenario(BaseModel):
    """A whole experiment: cluster shape, initial subscriptions, the script."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")
    description: str = ""
    nodes: int = Field(ge=1, le=MAX_NODES)
    interval: float = Field(0.2, ge=0.02, le=10.0)
    config_budget: int = Field(1, ge=1, le=1000)
    seed: int = 0
    topics: dict[TopicName, int] = Field(min_length=1, description="topic -> initial members")
    settle: float = Field(60.0, gt=0, le=MAX_SCRIPT_SECONDS)
    flooding: bool = True
    steps: tuple[Step, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        for topic, members in self.topics.items():
            if not 0 <= members <= self.nodes:
                raise ValueError(
                    f"topic {topic!r}: {members} initial members, but {self.nodes} nodes"
                )
        for position, step in enumerate(self.steps):
            where = f"step {position} ({step.action} at {step.at:g} s)"
            if step.topic is not None and step.topic not in self.topics:
                raise ValueError(f"{where}: topic {step.topic!r} is not in topics")
            for index in step.nodes or ():
                if not 0 <= index < self.nodes:
                    raise ValueError(f"{where}: node {index} does not exist (0..{self.nodes - 1})")
        if list(self.steps) != sorted(self.steps, key=lambda s: s.at):
            raise ValueError("steps must be in the order of their `at` times")
        return self

    @property
    def script_seconds(self) -> float:
        """When the last step's effect is over."""
        return max((step.ends_at for step in self.steps), default=0.0)


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file; ScenarioError with a readable message otherwise."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path} is not valid YAML{yaml_error_detail(exc)}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping (name, nodes, topics, steps, ...)")
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'scenario'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ScenarioError(f"{path}: {problems}") from None


def shipped_scenarios() -> dict[str, Path]:
    """The scenarios that come with the package, by name (file stem)."""
    folder = Path(__file__).with_name("scenarios")
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def resolve_scenario(name_or_path: str) -> Path:
    """A path as given, or the shipped scenario of that name."""
    path = Path(name_or_path)
    if path.exists():
        return path
    shipped = shipped_scenarios()
    if name_or_path in shipped:
        return shipped[name_or_path]
    names = ", ".join(shipped) or "none"
    raise ScenarioError(f"no scenario file {name_or_path!r} (shipped scenarios: {names})")
