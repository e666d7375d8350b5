"""The `pubsub` command's operational behaviour, with real processes: a supervisor and two
nodes (`LocalCluster`), the CLI run as separate OS processes exactly as an operator runs it.

Each test was written against a defect of the command as it was (the "Why" of the
operations issue) and fails on that code:

* `--version` did not exist;
* `status --supervisor NODE` (and the reverse) exited 0 printing a wrong view, and
  `publish`/`history`/`subscribe` through the supervisor's address said nothing helpful;
* a port that accepts connections but does not speak pubsub held every command for its
  whole --timeout;
* `unsubscribe` of a topic the node never joined reported success;
* `subscribe` took exactly one topic (joining 49 topics took 49 commands) and no patterns;
* `publish` reading stdin printed each acknowledgement only once the *next* line was read,
  and ignored SIGINT/SIGTERM until its input ended.

Every wait is bounded; every process a test starts is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll, terminate

pytestmark = pytest.mark.integration

#: Seconds one short CLI command may take on a loaded 2-core machine (interpreter start included).
COMMAND_TIMEOUT = 60.0
#: Seconds the interpreter and the command's imports may take to start, on a loaded machine.
#: The request timeout the commands below are given: far longer than any wait they should
#: make, so that ending well before it shows the bound at work (no speed is asserted).
LONG_TIMEOUT = 120.0


def pubsub(*args: str, stdin: str | None = None, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cliops"), 2, interval=0.2, admin=False) as c:
        c.subscribe(0, "news")
        yield c


# ------------------------------------------------------------------------------ --version
def test_version_is_printed() -> None:
    from importlib.metadata import version

    done = pubsub("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pubsub {version('pubsub-skipring')}"


# ------------------------------------------------------------------------------ roles
def test_status_of_a_node_given_as_the_supervisor_is_an_error(cluster: LocalCluster) -> None:
    node = cluster.node_refs[0]
    done = pubsub("status", "--supervisor", node)
    assert done.returncode == 1 and done.stdout == ""
    assert f"{node} is a subscriber node, not the supervisor; give its address with --node" in done.stderr
    done = pubsub("status", "--supervisor", node, "--json")
    assert done.returncode == 1 and done.stdout == ""


def test_a_node_given_to_a_supervisor_only_command_names_the_address_it_needs(cluster: LocalCluster) -> None:
    """Commands without --node do not tell the user to use --node."""
    node = cluster.node_refs[0]
    for args in (
        ("retention", "set", "news", "--max-count", "5", "--supervisor", node),
        ("retention", "show", "news", "--supervisor", node),
        ("topic", "purge", "news", "--yes", "--supervisor", node),
    ):
        done = pubsub(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        expected = f"{node} is a subscriber node, not the supervisor; the supervisor's address is needed here"
        assert expected in done.stderr and "--node" not in done.stderr, (args, done.stderr)


def test_the_supervisor_given_as_a_node_is_an_error_for_every_node_command(cluster: LocalCluster) -> None:
    sup = cluster.supervisor_ref
    # only `status` has a --supervisor option to point to
    expected = f"{sup} is the supervisor, not a subscriber node; a subscriber node's address is needed here"
    for args in (("status", "--node", sup), ("status", "--node", sup, "--json")):
        done = pubsub(*args)
        assert done.returncode == 1 and done.stdout == "", (args, done.stdout)
        assert f"{sup} is the supervisor, not a subscriber node; give its address with --supervisor" in done.stderr
    for args in (
        ("subscribe", "news", "--node", sup, "--detach"),
        ("subscribe", "news", "--node", sup, "--count", "1"),
        ("unsubscribe", "news", "--node", sup),
        ("publish", "news", "hello", "--node", sup),
        ("history", "news", "--node", sup),
    ):
        done = pubsub(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    # and the right addresses still work
    assert pubsub("status", "--supervisor", sup).returncode == 0
    assert pubsub("status", "--node", cluster.node_refs[0]).returncode == 0


def test_subscribe_refuses_stream_options_with_detach() -> None:
    """--detach prints no stream: options that shape one are refused, not ignored (before
    any daemon is asked, so no cluster is needed)."""
    for extra, named in (
        (("--count", "3"), "--count applies"),
        (("--since", "3"), "--since applies"),
        (("--json", "--new-only"), "--new-only and --json apply"),
    ):
        done = pubsub("subscribe", "news", "--node", "127.0.0.1:1", "--detach", *extra)
        assert done.returncode == 2, (extra, done.stderr)
        assert f"{named} to the printed stream; with --detach the node only joins the topics" in done.stderr


@pytest.mark.parametrize("given", ["", "has space", "x" * 65])
def test_a_message_id_that_is_no_id_is_a_usage_error(given: str) -> None:
    """`--msg-id ""` was taken as "none" (the node made one up) although --help says 1-64
    characters; it is refused like any other bad id, before anything is sent."""
    done = pubsub("publish", "news", "m", "--node", "127.0.0.1:1", "--msg-id", given)
    assert done.returncode == 2, done.stderr
    assert "Invalid value for --msg-id: a message id is 1..64 printable ASCII" in done.stderr, done.stderr


def test_retention_limits_too_large_for_the_protocol_are_usage_errors() -> None:
    """Refused before anything is sent (before, the encoder's error blamed the daemon)."""
    for option, value in (("--max-count", "99999999999999999999999"), ("--max-age", "99999999999999999d"),
                          ("--max-bytes", "99999999999999TiB")):
        done = pubsub("retention", "set", "news", "--supervisor", "127.0.0.1:1", option, value)
        assert done.returncode == 2, (option, done.stderr)
        assert f"Invalid value for '{option}'" in done.stderr and "daemon" not in done.stderr


# ------------------------------------------------------------------------------ handshake
@pytest.fixture
def silent_port() -> Iterator[str]:
    """A process that accepts TCP connections on 127.0.0.1 and never sends a byte."""
    code = (
        "import socket, sys\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(64)\n"
        "print(s.getsockname()[1], flush=True)\n"
        "held = []\n"
        "while True:\n"
        "    held.append(s.accept()[0])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = selectors.DefaultSelector()
        ready.register(proc.stdout, selectors.EVENT_READ)
        assert ready.select(timeout=30), "the silent listener did not start"
        port = int(proc.stdout.readline())
        yield f"127.0.0.1:{port}"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--node", "{addr}"),
        ("status", "--supervisor", "{addr}"),
        ("subscribe", "news", "--node", "{addr}", "--detach"),
        ("unsubscribe", "news", "--node", "{addr}"),
        ("history", "news", "--node", "{addr}"),
        ("publish", "news", "hello", "--node", "{addr}"),
    ],
)
def test_a_port_that_does_not_speak_pubsub_fails_at_the_handshake_bound(silent_port: str, args: tuple[str, ...]) -> None:
    command = [a.format(addr=silent_port) for a in args]
    started = time.monotonic()
    done = pubsub(*command, "--timeout", str(LONG_TIMEOUT))
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert f"{silent_port} accepted the connection but sent no reply within 1 s" in done.stderr
    assert "does not speak pubsub" in done.stderr
    # It gave up at the 1 s handshake bound, not at the request timeout.
    assert took < LONG_TIMEOUT / 2, f"{command} took {took:.1f} s"


# ------------------------------------------------------------------------------ unsubscribe
def test_unsubscribing_a_topic_never_joined_is_an_error(cluster: LocalCluster) -> None:
    node = cluster.node_refs[1]
    done = pubsub("unsubscribe", "never-joined", "--node", node)
    assert done.returncode == 1, done.stdout
    assert f"{node} does not subscribe to never-joined" in done.stderr
    assert "nothing was changed" in done.stderr and done.stdout == ""


def test_following_a_topic_the_node_does_not_run_is_an_error_not_a_wait(cluster: LocalCluster) -> None:
    node = cluster.node_refs[1]
    done = pubsub("subscribe", "never-joined", "--node", node, "--no-join", "--timeout", str(LONG_TIMEOUT))
    assert done.returncode == 1, done.stdout
    assert "not_member" in done.stderr and "does not run 'never-joined'" in done.stderr, done.stderr


def test_a_live_subscribe_ends_when_the_node_leaves_and_says_how_to_resume(cluster: LocalCluster) -> None:
    node = cluster.node_refs[1]
    assert pubsub("publish", "leaving-soon", "m1", "--node", node).returncode == 1  # no member yet
    assert pubsub("subscribe", "leaving-soon", "--node", node, "--detach").returncode == 0
    assert pubsub("publish", "leaving-soon", "m1", "--node", node).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "subscribe", "leaving-soon", "--node", node, "--no-join"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().endswith(" m1\n")
        assert pubsub("unsubscribe", "leaving-soon", "--node", node).returncode == 0
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        terminate(proc)
    assert proc.returncode == 1 and out == "", (out, err)
    assert "left 'leaving-soon' after #1" in err and "resume with --since " in err, err


# ------------------------------------------------------------------------------ several topics, patterns
def test_one_command_joins_49_topics(cluster: LocalCluster) -> None:
    node = cluster.node_refs[1]
    topics = [f"bulk-{i:02d}" for i in range(49)]
    done = pubsub("subscribe", *topics, "--node", node, "--detach")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{node}: subscribing {t}" for t in topics]
    joined = cluster.node_status(1)["topics"]
    assert set(topics) <= set(joined)
    done = pubsub("unsubscribe", "bulk-*", "--node", node)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{node}: unsubscribing {t}" for t in topics]
    assert "pattern 'bulk-*' matched 49 topic(s) now" in done.stderr


def test_patterns_resolve_against_the_supervisors_topics(cluster: LocalCluster) -> None:
    first, second = cluster.node_refs
    for topic in ("sensors.a", "sensors.b", "other"):
        cluster.subscribe(0, topic)
    cluster.poll(
        lambda: [t for t in ("sensors.a", "sensors.b", "other")
                 if t not in cluster.supervisor_status()["topics"]],
        30, "the supervisor knows the new topics",
    )
    done = pubsub("subscribe", "sensors.*", "--node", second, "--detach")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{second}: subscribing sensors.a", f"{second}: subscribing sensors.b"]
    assert (
        "pattern 'sensors.*' matched 2 topic(s) now: sensors.a, sensors.b "
        "(topics created later are not joined)"
    ) in done.stderr
    assert {"sensors.a", "sensors.b"} <= set(cluster.node_status(1)["topics"])
    assert "other" not in cluster.node_status(1)["topics"]
    # a pattern that matches nothing changes nothing; --literal takes it as a name
    done = pubsub("subscribe", "nothing.*", "news", "--node", second, "--detach")
    assert done.returncode == 1 and "pattern 'nothing.*' matches none" in done.stderr
    assert "news" not in cluster.node_status(1)["topics"]
    # unsubscribe of a pattern: the node's own topics
    done = pubsub("unsubscribe", "sensors.?", "--node", second)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{second}: unsubscribing sensors.a", f"{second}: unsubscribing sensors.b"]


def test_a_streaming_pattern_follows_topics_created_later(cluster: LocalCluster) -> None:
    """`subscribe 'later.*'` while no such topic exists: when one appears (another node
    subscribes to it) the command joins it and prints what is published there."""
    first, second = cluster.node_refs
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "subscribe", "later.*", "--node", second, "--json",
         "--count", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline()  # the pattern is open once this line is out
        assert "pattern 'later.*' matched 0 topic(s) now: - (topics created later are followed too)" in said
        cluster.subscribe(0, "later.x")

        def joined() -> list[str]:
            topics = cluster.node_status(1).get("topics") or {}
            return [] if "later.x" in topics else ["node 1 has not joined later.x"]

        poll(joined, START_TIMEOUT, "the streaming pattern to join the new topic")
        cluster.publish(0, "later.x", "news from later")
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 0, err
    assert "new topic later.x matches a pattern: joining it" in err
    [delivery] = [json.loads(line) for line in out.splitlines()]
    assert delivery["topic"] == "later.x" and delivery["payload"] == "news from later"


def test_a_pattern_with_no_join_follows_what_the_node_runs(cluster: LocalCluster) -> None:
    """`subscribe 'runs.*' --no-join`: the pattern stands for the topics the node runs (not
    every topic of the supervisor, whose streams it could not follow), now and later."""
    first, second = cluster.node_refs
    cluster.subscribe(0, "runs.elsewhere")  # the supervisor knows it; node 1 does not run it
    cluster.subscribe(1, "runs.here")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "subscribe", "runs.*", "--node", second, "--no-join",
         "--json", "--count", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline()
        assert "pattern 'runs.*' matched 1 topic(s) now: runs.here" in said, said
        cluster.publish(1, "runs.here", "one")
        cluster.subscribe(1, "runs.later")
        cluster.poll(lambda: [] if "runs.later" in (cluster.node_status(1).get("topics") or {}) else ["not yet"],
                     START_TIMEOUT, "node 1 to run runs.later")
        cluster.publish(1, "runs.later", "two")  # a topic found later is streamed from its start
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        terminate(proc)
    assert proc.returncode == 0, err
    assert "new topic runs.later matches a pattern: following it" in err, err
    assert sorted(json.loads(line)["payload"] for line in out.splitlines()) == ["one", "two"]
    assert "runs.elsewhere" not in (cluster.node_status(1).get("topics") or {})


def test_streaming_several_topics_prefixes_each_line_with_its_topic(cluster: LocalCluster) -> None:
    first = cluster.node_refs[0]
    cluster.subscribe(0, "multi-a")
    cluster.subscribe(0, "multi-b")
    cluster.publish(0, "multi-a", "from a")
    cluster.publish(0, "multi-b", "from b")
    done = pubsub("subscribe", "multi-a", "multi-b", "--node", first, "--count", "2", timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert lines[0].startswith("multi-a #1 ") and lines[0].endswith(" from a")
    assert lines[1].startswith("multi-b #1 ") and lines[1].endswith(" from b")
    done = pubsub("subscribe", "multi-a", "multi-b", "--node", first, "--since", "1")
    assert done.returncode == 2 and "--since numbers one topic" in done.stderr


def test_published_from_ms_skips_what_was_published_before_it(cluster: LocalCluster) -> None:
    """`subscribe --published-from-ms MS` delivers only what was published at or after MS
    (by the publications' own published_ms), says so, and is refused with --new-only."""
    node = cluster.node_refs[0]
    cluster.subscribe(0, "bounded")
    for payload in ("old 1", "old 2"):
        cluster.publish(0, "bounded", payload)
    old = [json.loads(line) for line in pubsub("history", "bounded", "--node", node, "--json").stdout.splitlines()]
    assert len(old) == 2
    bound = max(d["published_ms"] for d in old) + 1
    poll(lambda: [] if time.time() * 1000 > bound + 1 else ["not yet"], 5.0, "the clock passing the bound")
    cluster.publish(0, "bounded", "new")
    done = pubsub("subscribe", "bounded", "--node", node, "--published-from-ms", str(bound), "--count", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=2)[0] == "#3" and done.stdout.rstrip().endswith(" new"), done.stdout
    assert f"only what was published from {bound} ms on" in done.stderr
    refused = pubsub("subscribe", "bounded", "--node", node, "--new-only", "--published-from-ms", str(bound))
    assert refused.returncode == 2 and "at most one of --new-only and --published-from-ms" in refused.stderr


def test_a_broken_new_only_stream_names_its_bound_to_resume_with(tmp_path: Path) -> None:
    """A new-only stream whose node dies prints the cursor and the new-only bound to resume
    it with (the cursor alone would deliver the history the node fetches later)."""
    with LocalCluster(tmp_path, 1, interval=0.2, admin=False) as lone:
        lone.subscribe(0, "gone")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pubsub.cli.main", "subscribe", "gone", "--node", lone.node_refs[0], "--new-only"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        try:
            assert proc.stderr is not None
            header = proc.stderr.readline()
            assert "subscribed to gone" in header and "only what was published from " in header, header
            bound = int(header.split("only what was published from ")[1].split()[0])
            lone.kill(0, signal.SIGKILL)
            _, err = proc.communicate(timeout=COMMAND_TIMEOUT)
        finally:
            terminate(proc)
    assert proc.returncode == 1, err
    assert "resume with --since " in err and err.rstrip().endswith(f"--published-from-ms {bound}"), err


# ------------------------------------------------------------------------------ publish from stdin
class Publisher:
    """`pubsub publish TOPIC --node NODE` reading a pipe we hold open."""

    def __init__(self, node: str, topic: str, *extra: str, argv: list[str] | None = None) -> None:
        args = argv if argv is not None else ["publish", topic, "--node", node, *extra]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pubsub.cli.main", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._out = b""

    def send(self, *lines: str) -> None:
        stdin: IO[bytes] | None = self.proc.stdin
        assert stdin is not None
        stdin.write("".join(line + "\n" for line in lines).encode())
        stdin.flush()

    def stdout_lines(self, count: int, timeout: float) -> list[str]:
        """The first `count` lines of stdout, waiting at most `timeout` seconds for them."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        while self._out.count(b"\n") < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if sel.select(timeout=left):
                chunk = self.proc.stdout.read()
                if not chunk:
                    break
                self._out += chunk
        return self._out.decode().splitlines()[:count]

    def stop(self, sig: int, timeout: float) -> tuple[int | None, float, str]:
        """Send `sig`; (exit code or None if still running after `timeout`, seconds, stderr)."""
        started = time.monotonic()
        os.kill(self.proc.pid, sig)
        try:
            code: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - started
        err = b""
        if code is not None:
            assert self.proc.stderr is not None
            err = self.proc.stderr.read()
        return code, took, err.decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@pytest.fixture
def publishers() -> Iterator[list[Publisher]]:
    started: list[Publisher] = []
    try:
        yield started
    finally:
        for p in started:
            p.kill()


def test_each_acknowledgement_is_printed_before_the_next_line_is_read(
    cluster: LocalCluster, publishers: list[Publisher]
) -> None:
    p = Publisher(cluster.node_refs[0], "news")
    publishers.append(p)
    p.send("first")
    lines = p.stdout_lines(1, timeout=20)
    assert len(lines) == 1 and lines[0].startswith("ack news "), lines
    p.send("second")
    assert len(p.stdout_lines(2, timeout=20)) == 2
    code, took, err = p.stop(signal.SIGTERM, timeout=10)
    assert code == 0, err
    assert "stopped by SIGTERM: 2 publication(s) acknowledged, none unknown" in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_stdin_publish_at_once_with_an_honest_summary(
    cluster: LocalCluster, publishers: list[Publisher], sig: int
) -> None:
    """The node stops answering (SIGSTOP) with two lines in flight: the signal ends the
    command without waiting for answers that cannot come (its acknowledgement timeout is
    far longer than the test waits), the summary counts what was acknowledged and names the
    lines whose fate is unknown, and the exit status is 1."""
    p = Publisher(cluster.node_refs[0], "news", "--timeout", str(LONG_TIMEOUT))
    publishers.append(p)
    p.send("acked-1", "acked-2")
    assert len(p.stdout_lines(2, timeout=20)) == 2
    cluster.kill(0, signal.SIGSTOP)
    try:
        p.send("lost-3", "lost-4")
        time.sleep(0.3)  # let the two requests leave (nothing can answer them now)
        code, took, err = p.stop(sig, timeout=LONG_TIMEOUT / 4)
    finally:
        cluster.kill(0, signal.SIGCONT)
    assert code is not None, f"the publisher was still waiting {took:.0f} s after the signal"
    name = signal.Signals(sig).name
    assert code == 1, err
    assert f"stopped by {name}: 2 publication(s) acknowledged, 2 unknown" in err
    assert "unknown: line 3: lost-3" in err and "unknown: line 4: lost-4" in err


def test_an_idle_stdin_publish_stops_on_sigterm(cluster: LocalCluster, publishers: list[Publisher]) -> None:
    """`tail -F log | pubsub publish` under a service manager: no input, then SIGTERM."""
    p = Publisher(cluster.node_refs[0], "news", "--quiet")
    publishers.append(p)
    p.send("only-idle")

    def not_stored() -> list[str]:
        done = pubsub("history", "news", "--node", cluster.node_refs[0])
        return [] if "only-idle" in done.stdout else ["'only-idle' not in the node's history yet"]

    # Acknowledged (so the command is up and idle on its next read), then SIGTERM.
    poll(not_stored, START_TIMEOUT, "the publication to be stored")
    code, took, err = p.stop(signal.SIGTERM, timeout=30)
    assert code == 0, (code, took, err)
    assert "stopped by SIGTERM: 1 publication(s) acknowledged, none unknown" in err


def test_publish_from_stdin_still_ends_at_the_end_of_input(cluster: LocalCluster) -> None:
    done = pubsub("publish", "news", "--node", cluster.node_refs[1], "--json", stdin="x\ny\r\nz")
    assert done.returncode == 0, done.stderr
    acks = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(acks) == 3 and all(a["topic"] == "news" for a in acks)
    history = pubsub("history", "news", "--node", cluster.node_refs[0], "--json")
    payloads = [json.loads(line)["payload"] for line in history.stdout.splitlines()]
    assert sorted(payloads[-3:]) == ["x", "y", "z"]


def test_a_failed_stdin_line_names_itself_and_the_later_lines_that_were_stored_anyway(
    cluster: LocalCluster,
) -> None:
    """Reading stops at a refused line, but up to a window of later lines were already
    sent: the error names the failed line and exactly the later lines acknowledged (they are
    stored: sending them again would store them twice).  It said "N acknowledged before the
    failure", counting those later lines as earlier ones."""
    node = cluster.node_refs[0]
    assert pubsub("subscribe", "refused-mid", "--node", node, "--detach").returncode == 0
    lines = ["pre-1", "x" * 100_000, *(f"post-{i}" for i in range(1, 41))]
    done = pubsub("publish", "refused-mid", "--node", node, stdin="\n".join(lines) + "\n")
    assert done.returncode == 1, done.stderr
    assert "Error: line 2: " in done.stderr and "payload_too_large" in done.stderr, done.stderr
    history = pubsub("history", "refused-mid", "--node", node, "--json")
    stored = [json.loads(line)["payload"] for line in history.stdout.splitlines()]
    later = sorted(int(p.removeprefix("post-")) + 2 for p in stored if p.startswith("post-"))  # line numbers
    assert stored[0] == "pre-1" and len(done.stdout.splitlines()) == len(stored)
    if later:
        from pubsub.cli.publishing import line_ranges

        assert f"were acknowledged too: {line_ranges(later)} -- do not send them again" in done.stderr, done.stderr
        assert f"(1 acknowledged before it; {len(later)} line(s) after it" in done.stderr
    else:
        assert done.stderr.rstrip().endswith("(1 acknowledged before it)"), done.stderr


def test_a_closed_stdout_ends_the_printing_not_the_publishing(cluster: LocalCluster) -> None:
    """`seq 300 | pubsub publish ... | head -1`: every line is published and the exit status
    is 0; stderr says the acknowledgements are no longer printed.  It stopped silently
    after a few dozen lines with status 0."""
    node = cluster.node_refs[0]
    assert pubsub("subscribe", "headed", "--node", node, "--detach").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "publish", "headed", "--node", node],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write("".join(f"headed-{i}\n" for i in range(1, 301)))
        proc.stdin.close()
        assert proc.stdout.readline().startswith("ack headed ")
        proc.stdout.close()  # as `head -1` does once it has its line
        code = proc.wait(timeout=COMMAND_TIMEOUT)
        err = proc.stderr.read()
    finally:
        terminate(proc)
    assert code == 0, err
    assert "stdout was closed: acknowledgements are no longer printed; publishing the rest" in err, err
    history = pubsub("history", "headed", "--node", node)
    assert len(history.stdout.splitlines()) == 300, history.stdout[-500:]


def test_publish_from_an_empty_stdin_says_nothing_was_published() -> None:
    """Empty input is not an error, but not silence either: stderr says nothing was sent
    (and that no node was asked, so a wrong --node is not vouched for)."""
    (port,) = pick_free_ports(1)
    done = pubsub("publish", "news", "--node", f"127.0.0.1:{port}", stdin="")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "nothing published: stdin ended without a line" in done.stderr
    assert f"127.0.0.1:{port} was not contacted" in done.stderr


def test_the_readme_client_library_example_runs_to_its_end(cluster: LocalCluster) -> None:
    """The README's client-library example, as written (its node address and topic
    replaced), in a fresh interpreter: it used to wait forever in its live subscription."""
    from pathlib import Path
    from textwrap import indent

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("**Client library**") :]
    block = section[section.index("```python\n") + len("```python\n") : section.index("```\n", 10)]
    assert '"127.0.0.1:7001"' in block and '"news"' in block, block
    code = block.replace('"127.0.0.1:7001"', repr(cluster.node_refs[1])).replace('"news"', '"readme-example"')
    script = f"import asyncio\n\nasync def main():\n{indent(code, '    ')}\n"
    script += "asyncio.run(asyncio.wait_for(main(), 60))\nprint('the example ended')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "b'hello'" in done.stdout and done.stdout.endswith("the example ended\n"), done.stdout


def test_the_readme_status_tables_name_every_field_the_daemons_report(cluster: LocalCluster) -> None:
    """The README calls the status JSON a stable interface: every top-level field of a
    supervisor's and a node's status, and every field of a node's publication section,
    appears in its table (a new-user trial found four missing)."""
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("## Status JSON (stable interface)") :]
    supervisor_table, node_table = section.split("`pubsub status --node H:P --json`:")
    node_table = node_table[: node_table.index("\n## ")]
    subscribe = pubsub("subscribe", "news", "--node", cluster.node_refs[0], "--detach")
    assert subscribe.returncode == 0, subscribe.stderr
    sup = json.loads(pubsub("status", "--supervisor", cluster.supervisor_ref, "--json").stdout)
    node = json.loads(pubsub("status", "--node", cluster.node_refs[0], "--json").stdout)
    def named(key: str, table: str, *prefixes: str) -> bool:
        return any(f"`{prefix}{key}`" in table or f"`{prefix}{key}." in table for prefix in ("", *prefixes))

    missing = [f"supervisor {k}" for k in sup if not named(k, supervisor_table)]
    missing += [
        f"supervisor topics.<t>.{k}" for t in sup["topics"].values() for k in t
        if not named(k, supervisor_table, "topics.<t>.")
    ]
    missing += [f"node {k}" for k in node if not named(k, node_table)]
    missing += [
        f"node topics.<t>.{k}" for t in node["topics"].values() for k in t
        if not named(k, node_table, "topics.<t>.") and f"/ `{k}`" not in node_table
    ]
    missing += [f"node publications.{k}" for k in node["publications"] if not named(k, node_table, "publications.")]
    assert not missing, missing
    # the documented counters are there at 0 too (a client need not guess a default), once each
    from pubsub.node.status import HANDOVER_COUNTERS, NODE_COUNTERS, ORDER_COUNTERS

    publications = node["publications"]
    for where, names in (("order", ORDER_COUNTERS), ("handover", HANDOVER_COUNTERS), ("node", NODE_COUNTERS)):
        assert set(names) <= set(publications[where]), (where, publications[where])
        assert all(f"`{name}`" in node_table for name in names), where
    assert not [k for k in publications["node"] if k.startswith("failed_")], publications["node"]


# ------------------------------------------------------------------------------ shell completion
@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [("pubsub sub", "1", "plain,subscribe"), ("pubsub node --dis", "2", "plain,--dissemination"),
     ("pubsub --log-format j", "2", "plain,json")],
)
def test_shell_completion_as_the_readme_documents_it(words: str, cword: str, expected: str) -> None:
    from pathlib import Path

    command = Path(sys.executable).with_name("pubsub")  # the installed entry point the README uses
    assert command.exists(), f"{command} is missing: install the project (pip install -e .)"
    script = subprocess.run(
        [str(command)], capture_output=True, text=True, timeout=60,
        env={**os.environ, "_PUBSUB_COMPLETE": "bash_source"}, stdin=subprocess.DEVNULL,
    )
    assert script.returncode == 0 and "complete " in script.stdout, script.stderr
    done = subprocess.run(
        [str(command)], capture_output=True, text=True, timeout=60,
        env={**os.environ, "_PUBSUB_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": cword},
        stdin=subprocess.DEVNULL,
    )
    assert expected in done.stdout.splitlines(), done.stdout


# ------------------------------------------------------------------------------ the broker form
@pytest.fixture
def lone_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One broker B(a,0) of a two-broker SCOT (its neighbour never starts), with an
    advertisement of client `cli` for `x > 0`."""
    base = tmp_path_factory.mktemp("broker")
    a_port, b_port = pick_free_ports(2)
    topology = base / "topo.json"
    topology.write_text(json.dumps({
        "factor": [["a", "b"]], "m": 1,
        "addresses": {"a,0": f"127.0.0.1:{a_port}", "b,0": f"127.0.0.1:{b_port}"},
    }))
    ref = f"127.0.0.1:{a_port}"
    log = open(base / "broker.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "broker", "--topology", str(topology), "--id", "a,0",
         "--heartbeat", "0"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        poll(lambda: [] if pubsub("status", "--broker", ref).returncode == 0 else ["not answering"],
             START_TIMEOUT, "the broker to answer")
        done = pubsub("advertise", "--broker", ref, "--filter", "x > 0")
        assert done.returncode == 0, done.stderr
        yield ref
    finally:
        terminate(proc)
        log.close()


START_TIMEOUT = 60.0


def test_broker_publish_from_stdin_answers_promptly_and_stops_on_sigterm(
    lone_broker: str, publishers: list[Publisher]
) -> None:
    p = Publisher("", "", argv=["publish", "--broker", lone_broker])
    publishers.append(p)
    p.send("x=1")
    lines = p.stdout_lines(1, timeout=20)
    assert len(lines) == 1 and lines[0].startswith("published cli/"), lines
    p.send("", "x=2")
    assert len(p.stdout_lines(2, timeout=20)) == 2
    code, took, err = p.stop(signal.SIGTERM, timeout=30)
    assert code == 0, (code, took, err)
    assert "stopped by SIGTERM: 2 publication(s) published, none unknown" in err


def test_a_node_given_as_a_broker_and_a_broker_given_as_a_node_are_errors(
    cluster: LocalCluster, lone_broker: str
) -> None:
    node = cluster.node_refs[0]
    done = pubsub("status", "--broker", node)
    assert done.returncode == 1 and done.stdout == ""
    assert f"{node} is a subscriber node, not a SCOT broker; give its address with --node" in done.stderr
    done = pubsub("status", "--node", lone_broker)
    assert done.returncode == 1
    assert f"{lone_broker} is a SCOT broker, not a subscriber node; give its address with --broker" in done.stderr
