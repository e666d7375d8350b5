"""What an attacker of the integration tests holds and does: raw connections to a daemon's
port (plain TCP or TLS with a certificate of its choosing), frames written straight onto
them, a node certificate for a reference of its own, listeners at addresses of its own
choosing that record what the daemons send there.

Used by tests/integration/test_attacks.py (the attacks of issue 13 against a TLS and an
insecure cluster) and tests/integration/test_tls.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterable
from pathlib import Path

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Message, Ref
from pubsub.ops.processes import pick_free_ports, port_is_free
from pubsub.ops.tlsfiles import ClusterCerts
from pubsub.runtime.certificates import issue, load_ca, write_pair
from pubsub.runtime.identity import file_stem


def tls_context(certs: ClusterCerts, name: str, ca: Path | None = None) -> ssl.SSLContext:
    """A client-side TLS context presenting the certificate issued to `name` in `certs`,
    trusting `ca` (default: that cluster's CA)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(ca or certs.ca))
    cert, key = certs.pairs[name]
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def own_node_identity(certs: ClusterCerts) -> tuple[Ref, ssl.SSLContext]:
    """A node certificate of the cluster CA for a free reference of the attacker's own (a
    member of nothing), and a client-side context presenting it."""
    ref = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")
    ca_cert, ca_key = load_ca(certs.directory)
    cert, key = issue(ca_cert, ca_key, "node", ref)
    crt, keyfile = write_pair(certs.directory, file_stem("node", ref), cert, key)
    certs.pairs[ref] = (crt, keyfile)
    return ref, tls_context(certs, ref)


async def exchange(
    ref: str, ctx: ssl.SSLContext | None, *frames: Message, wait: float = 30.0, replies: int | None = None
) -> list[Message]:
    """Open a connection to `ref`, send `frames`, return what comes back until the daemon
    refuses something (an ErrorReply), closes the connection, `replies` frames came, or
    `wait` seconds pass (a loaded machine may take seconds to answer; a refusal or a close
    ends the wait at once)."""
    host, _, port = ref.rpartition(":")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port), ssl=ctx), 10)
    writer.write(b"".join(wire.encode(f) for f in frames))
    decoder = FrameDecoder(wire.DEFAULT_MAX_FRAME)
    got: list[Message] = []

    def done() -> bool:
        return any(isinstance(m, ErrorReply) for m in got) or (replies is not None and len(got) >= replies)

    try:
        async with asyncio.timeout(wait):
            while not done() and (data := await reader.read(65536)):
                got.extend(wire.decode(p) for p in decoder.feed(data))
    except (TimeoutError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return got


def codes(replies: Iterable[Message]) -> list[str]:
    """The codes of the ErrorReply frames among `replies`."""
    return [m.code for m in replies if isinstance(m, ErrorReply)]


class Listener:
    """A plain TCP listener at a free port of 127.0.0.1 (an address of the attacker's
    choosing) that records every frame any connection brings; `ref` is its address."""

    def __init__(self) -> None:
        self.frames: list[Message] = []
        self.server: asyncio.Server | None = None
        self.ref = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> Listener:
        host, _, port = self.ref.rpartition(":")
        self.server = await asyncio.start_server(self._serve, host, int(port))
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        decoder = FrameDecoder(wire.DEFAULT_MAX_FRAME)
        with contextlib.suppress(ConnectionError, wire.WireError):
            while data := await reader.read(65536):
                self.frames.extend(wire.decode(p) for p in decoder.feed(data))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self._writers:
            writer.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)


def contiguous_base_port(count: int) -> int:
    """A port p such that p .. p + count - 1 are all free now (for `LocalCluster(base_port=p)`:
    the supervisor then has the lowest reference of its cluster)."""
    for _ in range(200):
        port = pick_free_ports(1)[0]
        if port + count <= 65535 and len(str(port)) == len(str(port + count)) and all(
            port_is_free(port + k) for k in range(count)
        ):
            return port
    raise RuntimeError(f"no {count} contiguous free ports found")
