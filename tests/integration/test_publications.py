"""Integration: publications through real daemons (OS processes on 127.0.0.1).

Cluster A -- a supervisor and 18 nodes; 16 of them subscribe to "pubs", node 16 joins
late, node 17 never subscribes.  The steps share the cluster and run in file order:

a. the 16 members form exactly SR(16);
b. 1,000 publications from 4 publishers (nodes 0, 4, 8, 12): 988 through the client
   library, 12 through ``pubsub publish`` (10 lines on stdin, 2 as arguments), while live
   subscriptions at three nodes follow from since=0 and node 7 is killed with SIGKILL
   mid-stream and restarted on its port and data directory.  Every member then holds
   exactly the 1,000 acknowledged publications, numbered 1..1000 without gaps or repeats;
   each live subscription received all of them exactly once, in order; node 7 kept
   everything it held before the kill under the same numbers;
c. node 16 subscribes through ``pubsub subscribe --json --count 1000`` and receives the
   whole history;
d. publishing through node 17 (not a member) is acknowledged by a member and reaches
   everyone; publishing to a topic without members and an oversize payload fail with a
   clear message and exit status 1;
e. a client reads part of the stream, disconnects, misses a publication, reconnects with
   since = the last number it read, and gets exactly the rest; ``pubsub subscribe`` exits
   0 quietly on Ctrl-C;
f. a forged PublishNew (key not matching its content) is rejected and shows up in
   ``status``;
g. nothing acknowledged is lost: four nodes subscribe to "vault", one of them publishes
   5 publications and gets its acknowledgements, then all four are killed with SIGKILL;
   the publisher is restarted alone on its data, and two nodes that join later receive
   all 5.

Cluster B -- 8 nodes with flooding off (``--no-flooding``): 100 publications from two
publishers reach every node by anti-entropy alone.

Every wait polls a condition under a deadline; every process is stopped at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pubsub.client.library import Ack, Client
from pubsub.kernel import wire
from pubsub.kernel.control import Hello
from pubsub.kernel.message import Ref, Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.publications.messages import Delivery, Publication, PublishNew
from pubsub.publications.topicstate import make_publication
from tests.cluster_checks import ring_problems

# The steps share one cluster: tests/conftest.py keeps this module on one xdist worker.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T = "pubs"
N_MEMBERS = 16
LATE, OUTSIDER = 16, 17
PUBLISHERS = (0, 4, 8, 12)
LIBRARY_EACH = 247  # 4 x 247 = 988 through the library, 12 through the CLI
CLI_LINES = 10
TOTAL = 1000
KILLED = 7
FOLLOWERS = (1, 9, 15)
INTERVAL = 0.2
CONVERGE = 60.0
WINDOW = 32


def cli_run(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``pubsub ARGS`` as a subprocess; the caller checks the exit status."""
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def numbering_problems(name: str, entries: list[dict[str, Any]], keys: set[str]) -> list[str]:
    """Why `entries` (history dicts) are not exactly `keys` numbered 1..len(keys)."""
    seqs = [e["local_seq"] for e in entries]
    got = [e["key"] for e in entries]
    problems = []
    if seqs != list(range(1, len(entries) + 1)):
        problems.append(f"{name}: local numbers are not 1..{len(entries)}")
    if len(set(got)) != len(got):
        problems.append(f"{name}: {len(got) - len(set(got))} repeated publications")
    if set(got) != keys:
        problems.append(
            f"{name}: holds {len(set(got) & keys)} of {len(keys)}, {len(set(got) - keys)} unexpected"
        )
    return problems


@dataclass
class Story:
    """Cluster A and what the steps learned."""

    cluster: LocalCluster
    acks: list[Ack] = field(default_factory=list)
    failed: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def keys(self) -> set[str]:
        return {a.key.hex() for a in self.acks}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.failed is not None:
            pytest.skip(f"depends on step {self.failed}, which failed")
        start = time.monotonic()
        try:
            yield
        except BaseException:
            self.failed = name
            raise
        self.timings[name] = round(time.monotonic() - start, 1)

    def wait_everyone_holds(self, refs: list[str], topic: str = T) -> None:
        keys = self.keys

        def problems() -> list[str]:
            found: list[str] = []
            for ref, entries in self.cluster.histories(refs, topic).items():
                found.extend(numbering_problems(self.cluster.name_of(ref), entries, keys))
            return found

        self.cluster.poll(problems, CONVERGE, f"every node to hold {len(keys)} publications", 0.5)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    with LocalCluster(tmp_path_factory.mktemp("pubs"), N_MEMBERS + 2, interval=INTERVAL) as c:
        s = Story(c)
        yield s
        print(f"\nstep timings (s): {s.timings}")


def test_a_members_form_the_ring(story: Story) -> None:
    with story.step("a"):
        c = story.cluster
        for i in range(N_MEMBERS):
            c.subscribe(i, T, via_cli=i in (3, 11))  # `pubsub subscribe --detach`
        wanted = {T: set(c.node_refs[:N_MEMBERS])}
        c.poll(lambda: ring_problems(c, wanted), CONVERGE, "exact SR(16)")


async def _publish_share(ref: str, prefix: str, count: int) -> list[Ack]:
    async with Client(ref) as client:
        gate = asyncio.Semaphore(WINDOW)

        async def one(i: int) -> Ack:
            async with gate:
                return await client.publish(T, f"{prefix}-{i}")

        return list(await asyncio.gather(*(one(i) for i in range(count))))


async def _cli_publish(*args: str, stdin: bytes | None = None) -> list[Ack]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pubsub.cli.main", "publish", T, *args, "--json",
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode == 0, err.decode()
    acks = []
    for line in out.decode().splitlines():
        d = json.loads(line)
        acks.append(
            Ack(d["topic"], d["publisher"], d["seq"], bytes.fromhex(d["key"]), d["stored_by"], d["local_seq"])
        )
    return acks


async def _follow(ref: str, count: int) -> list[Delivery]:
    out: list[Delivery] = []
    async with Client(ref).subscribe(T, join=False) as sub:
        async for delivery in sub:
            out.append(delivery)
            if len(out) >= count:
                break
    return out


def test_b_thousand_publications_with_a_node_killed_mid_stream(story: Story) -> None:
    with story.step("b"):
        c = story.cluster
        refs = c.node_refs
        killed_ref = refs[KILLED]
        before_kill: list[Delivery] = []

        async def scenario() -> tuple[list[Ack], list[list[Delivery]]]:
            followers = [asyncio.ensure_future(_follow(refs[i], TOTAL)) for i in FOLLOWERS]
            shares = [
                asyncio.ensure_future(_publish_share(refs[p], f"lib{p}", LIBRARY_EACH))
                for p in PUBLISHERS
            ]
            lines = "".join(f"cli-line-{i}\n" for i in range(CLI_LINES)).encode()
            cli = [
                asyncio.ensure_future(_cli_publish("--node", refs[PUBLISHERS[0]], stdin=lines)),
                asyncio.ensure_future(_cli_publish("cli-arg-1", "--node", refs[PUBLISHERS[1]])),
                asyncio.ensure_future(_cli_publish("cli-arg-2", "--node", refs[PUBLISHERS[2]])),
            ]
            # Mid-stream: once a good part is stored at the victim, remember what it holds
            # and kill it; start it again while the publishers are still going.
            deadline = time.monotonic() + 60
            while True:
                held = await Client(killed_ref).history(T)
                if len(held) >= 250 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            before_kill.extend(await Client(killed_ref).history(T))
            await asyncio.to_thread(c.kill, KILLED, signal.SIGKILL)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(c.restart_node, KILLED)
            acks = [a for share in await asyncio.gather(*shares, *cli) for a in share]
            async with asyncio.timeout(CONVERGE):
                delivered = list(await asyncio.gather(*followers))
            return acks, delivered

        acks, delivered = asyncio.run(scenario())
        assert len(acks) == TOTAL
        story.acks = acks
        keys = story.keys
        assert len(keys) == TOTAL, "two acknowledgements name the same publication"
        assert {a.stored_by for a in acks} == {refs[p] for p in PUBLISHERS}
        assert 0 < len(before_kill) < TOTAL, "the kill was not mid-stream"
        for i, stream in zip(FOLLOWERS, delivered, strict=True):
            assert [d.local_seq for d in stream] == list(range(1, TOTAL + 1)), f"node {i}"
            assert {d.key.hex() for d in stream} == keys, f"node {i} stream"
        story.wait_everyone_holds(refs[:N_MEMBERS])
        # The killed node kept what it held, under the same numbers.
        after = c.history(KILLED, T)
        assert [(e["local_seq"], e["key"]) for e in after[: len(before_kill)]] == [
            (d.local_seq, d.key.hex()) for d in before_kill
        ]
        status = c.node_status(KILLED)
        assert status["publications"]["stored"][T] == TOTAL


def test_c_late_subscriber_gets_the_history_through_the_cli(story: Story) -> None:
    with story.step("c"):
        c = story.cluster
        done = cli_run("subscribe", T, "--node", c.node_refs[LATE], "--json", "--count", str(TOTAL))
        assert done.returncode == 0, done.stderr
        entries = [json.loads(line) for line in done.stdout.splitlines()]
        assert numbering_problems("late subscriber", entries, story.keys) == []
        assert entries[0]["payload"] and "publisher" in entries[0]


def test_d_publish_through_a_non_member_and_clear_failures(story: Story, tmp_path: Path) -> None:
    with story.step("d"):
        c = story.cluster
        members = set(c.node_refs[: LATE + 1])
        ack = c.publish(OUTSIDER, T, "through the outsider", via_cli=True)
        assert ack["stored_by"] in members and ack["publisher"] == c.node_refs[OUTSIDER]
        story.acks.append(
            Ack(T, ack["publisher"], ack["seq"], bytes.fromhex(ack["key"]), ack["stored_by"], None)
        )
        story.wait_everyone_holds([c.node_refs[i] for i in (0, 5, LATE)])
        assert "through the outsider" in {e["payload"] for e in c.history(LATE, T)}

        nobody = cli_run("publish", "nobody-here", "hello", "--node", c.node_refs[OUTSIDER])
        assert nobody.returncode == 1
        assert "no_members" in nobody.stderr and "nobody-here" in nobody.stderr
        assert "Traceback" not in nobody.stderr

        big = tmp_path / "big"
        big.write_bytes(b"x" * (64 * 1024 + 1))
        oversize = cli_run("publish", T, "--file", str(big), "--node", c.node_refs[0])
        assert oversize.returncode == 1
        assert "payload_too_large" in oversize.stderr and "65536" in oversize.stderr
        huge = tmp_path / "huge"
        huge.write_bytes(b"x" * (wire.MAX_PAYLOAD_BYTES + 1))
        too_big = cli_run("publish", T, "--file", str(huge), "--node", c.node_refs[OUTSIDER])
        assert too_big.returncode == 1 and "payload_too_large" in too_big.stderr


def test_e_resume_after_reconnect_and_ctrl_c(story: Story) -> None:
    with story.step("e"):
        c = story.cluster
        ref = c.node_refs[3]
        total = len(story.acks)

        async def scenario() -> None:
            client = Client(ref)
            async with client.subscribe(T, join=False) as sub:
                first = [await anext(sub) for _ in range(10)]
            assert [d.local_seq for d in first] == list(range(1, 11))
            missed = await Client(c.node_refs[5]).publish(T, "while away")
            story.acks.append(missed)
            # Back with since = the last number read: the rest, nothing twice, no gap.
            rest: list[Delivery] = []
            async with asyncio.timeout(CONVERGE):
                async with client.subscribe(T, since=sub.last_seq, join=False) as again:
                    async for d in again:
                        rest.append(d)
                        if d.key == missed.key:
                            break
            assert [d.local_seq for d in rest] == list(range(11, total + 2))
            assert {d.key.hex() for d in first + rest} == story.keys

        asyncio.run(scenario())

        proc = subprocess.Popen(
            [sys.executable, "-m", "pubsub.cli.main", "subscribe", T, "--node", ref, "--since", str(total - 2)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline() for _ in range(3)]  # #total-1, #total, #total+1
            assert [line.split()[0] for line in lines] == [f"#{n}" for n in range(total - 1, total + 2)]
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        assert out == "" and "Traceback" not in err and "Aborted" not in err


def test_f_forged_publication_is_counted_in_status(story: Story) -> None:
    with story.step("f"):
        c = story.cluster
        ref = c.node_refs[5]
        host, port = ref.rsplit(":", 1)
        good = make_publication(Ref("127.0.0.1:1"), 1, b"honest")
        forged = Publication(good.key, good.publisher, good.seq, b"tampered")

        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(
                wire.encode(Hello(ref=Ref("127.0.0.1:1"), role="peer"))
                + wire.encode(PublishNew(Topic(T), forged, 1))
            )

            def problems() -> list[str]:
                body = c.node_status(5)
                counters = body["publications"]["topic_counters"][T]
                if counters.get("rejected_key_mismatch", 0) < 1:
                    return ["the forged publication is not counted yet"]
                if body["publications"]["rejected_malformed"] < 1:
                    return ["publications.rejected_malformed is not surfaced"]
                if body["topics"][T]["publications"]["rejected_malformed"] < 1:
                    return ["topics.pubs.publications.rejected_malformed is not surfaced"]
                return []

            c.poll(problems, 10, "the rejection in status")
        assert "tampered" not in {e["payload"] for e in c.history(5, T)}
        text = c.cli("status", "--node", ref)
        assert "rejected malformed" in text and "publications:" in text
        assert "; dissemination tree;" in text  # the default, named as the flag names it


def test_g_nothing_acknowledged_is_lost(story: Story) -> None:
    with story.step("g"):
        c = story.cluster
        vault = "vault"
        holders = (8, 9, 10, 11)
        for i in holders:
            c.subscribe(i, vault)
        c.poll(
            lambda: [] if len(c.snapshot(vault)[0]) == 4 else ["vault members"], CONVERGE, "members"
        )

        async def publish() -> list[Ack]:
            async with Client(c.node_refs[holders[0]]) as client:
                return [await client.publish(vault, f"precious-{i}") for i in range(5)]

        acks = asyncio.run(publish())
        assert {a.stored_by for a in acks} == {c.node_refs[holders[0]]}
        # Right after the acknowledgements, every holder dies; the publisher comes back
        # alone from its data directory.
        for i in holders:
            c.kill(i, signal.SIGKILL)
        c.restart_node(holders[0])
        for i in (12, 13):
            c.subscribe(i, vault)
        keys = {a.key.hex() for a in acks}

        def problems() -> list[str]:
            found = []
            for ref, entries in c.histories([c.node_refs[i] for i in (holders[0], 12, 13)], vault).items():
                found.extend(numbering_problems(c.name_of(ref), entries, keys))
            return found

        c.poll(problems, CONVERGE, "the late vault members to hold the 5 publications", 0.5)


# --- cluster B: anti-entropy only ----------------------------------------------------------------
def test_without_flooding_anti_entropy_delivers_everything(tmp_path: Path) -> None:
    n, count = 8, 100
    with LocalCluster(tmp_path, n, interval=0.1, flooding=False) as c:
        for i in range(n):
            c.subscribe(i, T)
        c.poll(lambda: ring_problems(c, {T: set(c.node_refs)}), CONVERGE, "exact SR(8)")

        async def publish() -> list[Ack]:
            shares = await asyncio.gather(
                _publish_share(c.node_refs[0], "a", count // 2),
                _publish_share(c.node_refs[5], "b", count - count // 2),
            )
            return [a for share in shares for a in share]

        acks = asyncio.run(publish())
        keys = {a.key.hex() for a in acks}
        assert len(keys) == count

        def problems() -> list[str]:
            found: list[str] = []
            for ref, entries in c.histories(c.node_refs, T).items():
                found.extend(numbering_problems(c.name_of(ref), entries, keys))
            return found

        took = c.poll(problems, CONVERGE, "anti-entropy to deliver everything", 0.5)
        print(f"\nanti-entropy only: {count} publications everywhere {took:.1f} s after the last ack")
        for ref, body in c.node_statuses().items():
            section = body["publications"]
            assert section["flooding"] is False
            assert section["counters"].get("sent_publish_new", 0) == 0, ref
            assert section["counters"].get("repairs", 0) + section["counters"].get("published", 0) > 0

