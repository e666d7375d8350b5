"""The contracts every protocol mode implements (docs/architecture.md, "Core and Mode").

`Core` is the shape of a protocol core: a state machine without I/O that answers each
message and each Timeout with its effects: the messages it wants sent, and the order it
needs against durability and clients (`pubsub.kernel.effects`).  The network runtime
(`pubsub.runtime`) and the simulator (`pubsub.sim`) drive cores only through it.

`Mode` describes one protocol mode to the layers above the kernel: what the CLI offers,
which daemons it runs, how a local cluster of it starts and how it is simulated.  The
registry `pubsub.modes` lists the modes, one line each; the CLI, `pubsub cluster`, the
experiment runner and the simulator entry points find a mode there by name.  The fields
are plain callables so that the kernel needs to know nothing of click, asyncio or any
mode's types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send

#: One metric sample of an overlay core's optional ``measures()`` (the daemons export them,
#: `pubsub.telemetry.metrics.overlay_families`): (name, help, gauge | counter, labels, value).
Measure = tuple[str, str, str, dict[str, str], float]


class Core(Protocol):
    """A protocol core: pure, deterministic given its inputs, no I/O, no clock of its own."""

    def handle(self, msg: Message, now: float) -> Sequence[Effect]:
        """React to one message; what to do: messages to send (`Send`), where order
        against durability or a client matters `Persist` and `Answer`, and per-item work
        to be done once per batch `Batched` (`pubsub.kernel.effects`)."""
        ...

    def timeout(self, now: float) -> Sequence[Effect]:
        """The periodic action (the papers' Timeout); what to do, as for `handle`."""
        ...


class FaultRefused(Exception):
    """An overlay core refuses a fault injection (`corrupt`): a short `code` for the
    operator's error and a sentence saying why (e.g. "unknown_topic")."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Corruption:
    """What corrupting a node core's overlay state did (paper 000, Def. 1.1: convergence from
    any state): the `topics` whose state it replaced, the `pool` of references the new state
    points to, each topic's new status section (`states`), and the junk messages to send."""

    topics: list[str]
    pool: list[Ref]
    states: dict[str, Any]
    sends: list[Send]


@dataclass(frozen=True)
class VerbForm:
    """One mode's form of a verb the CLI shares between modes (subscribe, publish, status).

    The verb's first form is the default mode's command; another mode (`mode` names it in
    messages, e.g. "broker") adds `options`, one
    of which, `selector`, chooses its form (e.g. ``--broker``).  `own` and `foreign` name,
    by parameter, the options that belong only to this form or only to the default form
    (for the usage errors); `required` lists default-form parameters that become optional
    once a selector exists; `exclusive` (parameter -> flag, selector included) lists
    options of which exactly one must be given; `run(ctx, default_kwargs, own_kwargs)` does
    the work.
    """

    verb: str
    mode: str
    selector: str
    options: tuple[Callable[[Any], Any], ...]
    own: dict[str, str]
    foreign: dict[str, str]
    required: dict[str, str]
    run: Callable[[Any, dict[str, Any], dict[str, Any]], None]
    help: str
    exclusive: dict[str, str] = field(default_factory=dict)


#: One topic's snapshot of one node as the analysis reads it from the event stream
#: (docs/events.md, ``snapshot``): the overlay's own fields of the node's state.
Snapshot = Mapping[str, Any]


class TopicTracker(Protocol):
    """One topic's state over time, as the convergence analysis (`pubsub.ops.analysis`)
    scans it: the nodes' snapshots in, the measures of the overlay's legitimacy out."""

    def apply(self, ref: str, snapshot: Snapshot | None) -> None:
        """Replace one node's state (None: it is no member any more, or it died)."""
        ...

    def measures(self) -> dict[str, Any]:
        """The measures of the current state: ``members``, ``legitimate``, ``exact_nodes``
        (members whose state is as in the legitimate overlay of the current members),
        ``correct_edges`` and ``compared_edges``, ``labels_ok``, ``roots_equal``,
        ``mean_degree`` and ``max_degree``."""
        ...

    def degrees(self) -> list[int]:
        """Each member's number of distinct neighbours now."""
        ...

    def ideal_degrees(self) -> list[int]:
        """The same in the legitimate overlay of the current members."""
        ...


#: (members: ref -> stored key, states: ref -> the node's status entry for the topic,
#: name_of: ref -> a short name) -> (how the rows are ordered, header, rows).
MemberTable = Callable[
    [Mapping[str, str], Mapping[str, Mapping[str, Any]], Callable[[str], str]],
    tuple[str, list[str], list[list[str]]],
]

#: (topic, the supervisor's status entry for it, {polled ref: its status body, or why it
#: gave none}, suspects) -> the topic as the supervisor's web view draws it.
WebTopic = Callable[[str, Mapping[str, Any], Mapping[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class Overlay:
    """An overlay of the shared publication layer (`pubsub.publications`), as the node and
    supervisor daemons, the simulator and the tools host it: every part is looked up here,
    by the overlay's name (``pubsub node --overlay NAME``), never imported by them.

    package            the package that holds the overlay's cores (``pubsub.skipring``):
                       what no host may import (tests/test_overlay_boundaries.py derives
                       its rules from it), and which imports no host, no other overlay and
                       no I/O
    node_core          (ref, supervisor, *, rng, **publication options) -> the node core:
                       `pubsub.publications.node.PublicationNode` over the overlay's
                       `NodeOverlay`
    supervisor_core    (ref, *, rng, config_budget, probe_timeout, journal, peers,
                       peer_timeout) -> the supervisor core the supervisor daemon hosts
                       (`pubsub.supervisor.app.SupervisorCoreLike`)
    node_admits        with TLS: (msg, role, name, supervisor) -> why a peer's message is
                       refused at a node, or None
    supervisor_admits  with TLS: (msg, role, name) -> the same at the supervisor
    node_faults        (node app) -> its admin actions beyond the generic ones (the skip
                       ring: `pubsub.node.faults`' corrupt_node over the core's `corrupt`)
    supervisor_faults  (supervisor app) -> the same at the supervisor
    kinds              () -> the message kinds its daemons speak (the kernel's, the shared
                       publication layer's and its own), which their runtime's counters
                       report from the first scrape
    member_key         (stored key) -> the key, checked (ValueError if malformed): what the
                       supervisor's database stores per member (the skip ring's label bits)
    legitimate         (supervisor status, {node ref: node status}, topic) -> the problems
                       that keep the topic from the overlay's legitimate state ([] when
                       legitimate): the independent check of `pubsub cluster status`, the
                       experiments and the analysis
    reports_legitimate ({node ref: its status entry for the topic}) -> whether the nodes
                       that report a topic hold its legitimate state, judged from their
                       reports alone (the experiment runner's periodic check)
    member_table       the demo's table of one topic (`MemberTable`)
    web_topic          (topic, supervisor's status entry for it, {polled ref: status body
                       or why none}, suspects) -> the topic as the supervisor's web view
                       draws it (`WebTopic`): ``topic``, ``n``, ``members`` (ref, label, r,
                       answering, suspect, publications), ``edges`` (from, to, kind),
                       ``legitimate``, ``problems``, ``legitimate_database``,
                       ``publications_agree``
    topic_tracker      () -> a `TopicTracker` for the convergence analysis, or None where
                       the analysis does not measure this overlay yet
    status_lines       (node status body) -> lines `pubsub status --node` prints before the
                       topics (what the overlay holds beyond each topic's entry), or None
    disseminations     how new publications may spread on it besides anti-entropy
                       (`pubsub.publications.node.DISSEMINATIONS`), its default first: a
                       node refuses at start-up any other (the arc broadcast needs a ring)
    """

    name: str
    summary: str
    package: str
    node_core: Callable[..., Any]
    supervisor_core: Callable[..., Any]
    node_admits: Callable[[Message, str, str, Any], str | None]
    supervisor_admits: Callable[[Message, str, str], str | None]
    node_faults: Callable[[Any], dict[str, Any]]
    supervisor_faults: Callable[[Any], dict[str, Any]]
    kinds: Callable[[], tuple[str, ...]]
    member_key: Callable[[str], str]
    legitimate: Callable[[Any, Any, str], list[str]]
    reports_legitimate: Callable[[Mapping[str, Mapping[str, Any]]], bool]
    member_table: MemberTable
    web_topic: WebTopic
    topic_tracker: Callable[[], TopicTracker] | None = None
    status_lines: Callable[[Mapping[str, Any]], list[str]] | None = None
    disseminations: tuple[str, ...] = ("tree", "flood")


@dataclass(frozen=True)
class Mode:
    """One protocol mode, as the layers above the kernel see it.

    name               the mode's name in the registry and on the command line
    summary            one line for `--help` and the docs
    register_messages  import the mode's message modules, so their kinds are decodable
    make_core          build one of the mode's cores (mode-specific arguments)
    daemons            daemon role -> the function that runs it until SIGTERM
    role_names         daemon role -> how an error message names it ("a subscriber node");
                       the CLI's address option for a role is ``--ROLE``
    commands           the mode's own CLI commands (click commands)
    verb_forms         its forms of the shared verbs (`VerbForm`)
    local_cluster      start a local cluster of real processes (its launcher class)
    simulation         build an in-process simulation of the mode (its world on the
                       one discrete-event engine, `pubsub.sim.engine`)
    overlay            for an overlay of the shared publication layer, its parts (`Overlay`),
                       which the node and supervisor daemons, `pubsub cluster`, the
                       simulator (`pubsub.sim.world`) and the tools host: an overlay needs
                       none of the fields above but its messages (the shared daemons,
                       launcher and simulator serve it, chosen with ``--overlay``)
    """

    name: str
    summary: str
    register_messages: Callable[[], None]
    make_core: Callable[..., Core] | None = None
    daemons: dict[str, Callable[..., Any]] = field(default_factory=dict)
    role_names: dict[str, str] = field(default_factory=dict)
    commands: Callable[[], list[Any]] = field(default=lambda: [])
    local_cluster: Callable[..., Any] | None = None
    simulation: Callable[..., Any] | None = None
    verb_forms: Callable[[], list[VerbForm]] = field(default=lambda: [])
    overlay: Overlay | None = None
