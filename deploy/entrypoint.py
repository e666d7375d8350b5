#!/usr/bin/env python3
"""Entry point of the container image (installed as /usr/local/bin/pubsub-entrypoint).

One image runs every role; docker-compose.yml picks the role with the command::

    pubsub-entrypoint supervisor     the supervisor, listening on $PUBSUB_SUPERVISOR
    pubsub-entrypoint node           a subscriber node joining $PUBSUB_TOPICS
    pubsub-entrypoint broker         a SCOT broker (`pubsub broker`; PUBSUB_BROKER_TOPOLOGY,
                                     PUBSUB_BROKER_ID and the other PUBSUB_BROKER_* settings)
    pubsub-entrypoint analysis       `pubsub analyze RUN_DIR --stream $PUBSUB_ANALYSIS_ARGS`
                                     over the event volume (RUN_DIR: $PUBSUB_RUN_DIR)
    pubsub-entrypoint health ROLE    healthcheck: exit 0 when the daemon answers `status`
    pubsub-entrypoint client-bundle NAME   a tar (stdout) of the CA and a client certificate
                                     NAME, for a client outside (see TLS below)
    pubsub-entrypoint CMD ARGS...    anything else is run as given (`pubsub publish ...`)

A daemon's reference is the address it listens on, and other containers must be able to
reach it.  The supervisor listens on $PUBSUB_SUPERVISOR (default ``supervisor:7000``: the
compose service name, which resolves to the supervisor container's own address), so its
reference is the name the nodes were given.  A node cannot use its service name (every
replica shares it), so it listens on its container's own IP address
($PUBSUB_ADVERTISE_HOST overrides it) and port $PUBSUB_NODE_PORT (default 7001);
$PUBSUB_LISTEN overrides the whole address for either role.

A node's data directory is a *slot* of the node volume, ``$PUBSUB_DATA_ROOT/nodes/slot-K``
(unless $PUBSUB_DATA_DIR is set): the node claims the first slot no running node holds, by
an exclusive lock on ``slot-K.lock`` that the daemon keeps (the descriptor survives the
exec) until it exits.  Replicas sharing the volume therefore never share a store, and a
container that is recreated -- a new hostname, a new address -- takes over a free slot with
the store and topics of the node that ran there before, instead of starting empty.
$PUBSUB_TOPICS (comma- or space-separated) is added to
the node's durable topic set (`pubsub.node.app.TopicFile`) before it starts; the node then
joins them as it joins any remembered topic.  Every other setting is a ``PUBSUB_*``
environment variable that the daemons read themselves (README, "Settings").

TLS with certificates made on the fly: when $PUBSUB_CERTS_DIR is set (docker-compose.yml
sets it to the shared volume ``/var/lib/pubsub/tls``), every start of the entry point first
makes sure that directory holds a cluster CA (``ca.crt``, ``ca.key``) and the certificate
the client commands inside the containers share, the operator's (``admin-compose.crt`` /
``.key``: an admin certificate, `SHARED`), creating what is missing under an exclusive
lock on ``.lock`` there, so containers starting together make one CA.  A daemon role then
gets a certificate of its own, issued at every start for the reference it listens on (a
node's container IP can change when it is recreated) into ``$PUBSUB_DATA_ROOT/identity``,
which is not a volume: a daemon's key stays in its container.  The daemon is given
``--tls-ca/--tls-cert/--tls-key`` (which take precedence over ``PUBSUB_TLS_*``).  Every
other command -- ``pubsub publish ...``, the healthcheck -- runs as a client with
``PUBSUB_TLS_CA/_CERT/_KEY`` naming that shared certificate unless they are set.
``pubsub-entrypoint client-bundle NAME`` issues a client certificate NAME (once) and writes
a tar of ``ca.crt``, ``client-NAME.crt`` and ``client-NAME.key`` to stdout, for a client
outside the containers (README, "Containers").  Without $PUBSUB_CERTS_DIR nothing of this
happens and the ``PUBSUB_TLS_*`` / ``PUBSUB_INSECURE`` settings apply as given.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import shlex
import socket
import sys
import tarfile
import time
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

DEFAULT_SUPERVISOR = "supervisor:7000"
DEFAULT_NODE_PORT = 7001
DEFAULT_DATA_ROOT = "/var/lib/pubsub"
DEFAULT_RUN_DIR = "/var/lib/pubsub/run"
#: Seconds to wait for the container's own name to resolve (DNS may lag container start).
RESOLVE_TIMEOUT = 30.0
#: Seconds the daemon may take to answer the status request of the healthcheck.
HEALTH_TIMEOUT = 3.0
#: Node data slots in one volume (nodes running at once from one compose file, at most).
MAX_SLOTS = 1024
#: The certificate that client commands inside the containers share (`pubsub` in the cli
#: service, `exec ... pubsub`, the healthchecks): the cluster operator's, so an admin one
#: (permissions: a plain client may not make nodes join topics or take admin actions).  It
#: gives nothing that a container holding the CA key could not mint for itself.
SHARED = ("admin", "compose")
#: Seconds to wait for the lock of the certificate directory (held for milliseconds).
CERTS_LOCK_TIMEOUT = 60.0


class EntrypointError(RuntimeError):
    """A configuration problem; printed as one line, exit status 2."""


def split_topics(value: str) -> list[str]:
    """Topic names from "a,b c" (commas and/or whitespace); empty entries dropped."""
    return [t for t in re.split(r"[,\s]+", value.strip()) if t]


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT) -> str:
    """The IPv4 address of `host`, retried until `timeout` (container DNS may lag)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as exc:
            if time.monotonic() > deadline:
                raise EntrypointError(f"cannot resolve {host!r}: {exc}") from None
            time.sleep(0.5)


def own_address(env: Mapping[str, str]) -> str:
    """This container's address as other containers reach it.

    $PUBSUB_ADVERTISE_HOST if set; else the address the container's hostname resolves to
    (compose writes it into /etc/hosts); if that is a loopback address, the source address
    the kernel would use towards the supervisor (a UDP connect sends nothing).
    """
    if env.get("PUBSUB_ADVERTISE_HOST"):
        return env["PUBSUB_ADVERTISE_HOST"]
    address = resolve(socket.gethostname())
    if not address.startswith("127."):
        return address
    sup_host, _, sup_port = supervisor_ref(env).rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((resolve(sup_host), int(sup_port)))
        return str(sock.getsockname()[0])


def supervisor_ref(env: Mapping[str, str]) -> str:
    return env.get("PUBSUB_SUPERVISOR") or DEFAULT_SUPERVISOR


def listen_ref(role: str, env: Mapping[str, str]) -> str:
    """The address the daemon of `role` listens on, which is also its reference."""
    if env.get("PUBSUB_LISTEN"):
        return env["PUBSUB_LISTEN"]
    if role == "supervisor":
        return supervisor_ref(env)
    if role == "node":
        port = env.get("PUBSUB_NODE_PORT") or str(DEFAULT_NODE_PORT)
        return f"{own_address(env)}:{port}"
    raise EntrypointError(f"no listening address for role {role!r}")


def data_dir(role: str, env: Mapping[str, str]) -> str:
    """The daemon's data directory: $PUBSUB_DATA_DIR, else one per role (a slot per node)."""
    if env.get("PUBSUB_DATA_DIR"):
        return env["PUBSUB_DATA_DIR"]
    root = env.get("PUBSUB_DATA_ROOT") or DEFAULT_DATA_ROOT
    if role == "node":
        return claim_slot(os.path.join(root, "nodes"))
    return os.path.join(root, role)


def claim_slot(nodes: str, slots: int = MAX_SLOTS) -> str:
    """The directory of the first free slot under `nodes`, claimed for this process and the
    daemon it becomes (see the module docstring): an exclusive, non-blocking flock on
    ``slot-K.lock`` through an inheritable descriptor that is never closed here."""
    try:
        os.makedirs(nodes, exist_ok=True)
    except OSError as exc:
        raise EntrypointError(f"cannot create {nodes}: {exc.strerror or exc}") from None
    for k in range(slots):
        path = os.path.join(nodes, f"slot-{k}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise EntrypointError(f"cannot open {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # a running node holds this slot
            continue
        os.set_inheritable(fd, True)  # held by the daemon after exec, released when it exits
        return os.path.join(nodes, f"slot-{k}")
    raise EntrypointError(f"all {slots} node slots under {nodes} are held by running nodes")


def add_topics(directory: str, topics: Sequence[str]) -> list[str]:
    """Add `topics` to the node's durable topic set in `directory`; the whole set, sorted."""
    from pubsub.kernel.wire import WireError, validate_topic
    from pubsub.node.topicfile import TopicFile, TopicFileError

    try:
        wanted = {validate_topic(t) for t in topics}
    except WireError as exc:
        raise EntrypointError(f"PUBSUB_TOPICS: {exc.detail}") from None
    try:
        topic_file = TopicFile(directory)
        stored = topic_file.load()
        if not wanted <= stored:
            topic_file.save(stored | wanted)
    except TopicFileError as exc:
        raise EntrypointError(str(exc)) from None
    return sorted(stored | wanted)


# --- certificates -----------------------------------------------------------------------------
def _locked(directory: Path, timeout: float = CERTS_LOCK_TIMEOUT) -> int:
    """An exclusive flock on ``directory/.lock`` (the descriptor; close it to release)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise EntrypointError(f"cannot use {directory}: {exc.strerror or exc}") from None
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise EntrypointError(f"{directory / '.lock'} held for {timeout:g} s") from None
            time.sleep(0.1)


def client_files(certs: Path, role: str, name: str) -> dict[str, str]:
    """The ``PUBSUB_TLS_*`` of a client using the `role` certificate `name` in `certs`."""
    from pubsub.runtime.identity import file_stem

    stem = certs / file_stem(role, name)
    return {"PUBSUB_TLS_CA": str(certs / "ca.crt"), "PUBSUB_TLS_CERT": f"{stem}.crt",
            "PUBSUB_TLS_KEY": f"{stem}.key"}


def ensure_shared(certs: Path, clients: Sequence[tuple[str, str]] = (SHARED,)) -> None:
    """The cluster CA in `certs` and a certificate for each (role, name) in `clients`,
    created (once, under the directory's lock) if missing."""
    from pubsub.runtime.certificates import issue, load_ca, make_ca, write_pair
    from pubsub.runtime.identity import IdentityError, file_stem

    fd = _locked(certs)
    try:
        if not (certs / "ca.key").exists():  # written after ca.crt: a CA is whole once it is there
            write_pair(certs, "ca", *make_ca("pubsub compose cluster CA"))
        ca_cert, ca_key = load_ca(certs)
        for role, name in clients:
            stem = file_stem(role, name)
            if not ((certs / f"{stem}.crt").exists() and (certs / f"{stem}.key").exists()):
                write_pair(certs, stem, *issue(ca_cert, ca_key, role, name))
    except IdentityError as exc:
        raise EntrypointError(str(exc)) from None
    except OSError as exc:
        raise EntrypointError(f"cannot write certificates into {certs}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def own_certificate(certs: Path, role: str, ref: str, env: Mapping[str, str]) -> list[str]:
    """Issue the certificate of the `role` daemon at `ref` with the CA in `certs` (a new key
    at every start, kept inside the container); its ``--tls-*`` flags."""
    from pubsub.runtime.certificates import issue, load_ca, write_pair
    from pubsub.runtime.identity import IdentityError, file_stem

    own = Path(env.get("PUBSUB_DATA_ROOT") or DEFAULT_DATA_ROOT) / "identity"
    try:
        ca_cert, ca_key = load_ca(certs)
        crt, key = write_pair(own, file_stem(role, ref), *issue(ca_cert, ca_key, role, ref))
    except IdentityError as exc:
        raise EntrypointError(str(exc)) from None
    except OSError as exc:
        raise EntrypointError(f"cannot write the certificate into {own}: {exc.strerror or exc}") from None
    return ["--tls-ca", str(certs / "ca.crt"), "--tls-cert", str(crt), "--tls-key", str(key)]


def certs_dir(env: Mapping[str, str]) -> Path | None:
    """$PUBSUB_CERTS_DIR: where the cluster's certificates are made on the fly, or None."""
    return Path(env["PUBSUB_CERTS_DIR"]) if env.get("PUBSUB_CERTS_DIR") else None


def tls_args(role: str, ref: str, env: Mapping[str, str]) -> list[str]:
    """The ``--tls-*`` flags of the daemon of `role` at `ref` ([] without $PUBSUB_CERTS_DIR)."""
    certs = certs_dir(env)
    if certs is None:
        return []
    ensure_shared(certs)
    return own_certificate(certs, role, ref, env)


def client_bundle(name: str, env: Mapping[str, str]) -> bytes:
    """A tar of ``ca.crt``, ``client-NAME.crt`` and ``client-NAME.key`` (NAME issued once)."""
    from pubsub.runtime.identity import IdentityError, check_name

    certs = certs_dir(env)
    if certs is None:
        raise EntrypointError("client-bundle needs PUBSUB_CERTS_DIR (the compose file sets it)")
    try:
        check_name("client", name)
    except IdentityError as exc:
        raise EntrypointError(str(exc)) from None
    ensure_shared(certs, (SHARED, ("client", name)))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path in client_files(certs, "client", name).values():
            info = tar.gettarinfo(path, arcname=os.path.basename(path))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
    return out.getvalue()


def client_env(env: MutableMapping[str, str]) -> None:
    """With $PUBSUB_CERTS_DIR, make sure the shared (admin) certificate exists and that
    ``PUBSUB_TLS_*`` name it (those already set are kept)."""
    certs = certs_dir(env)
    if certs is None:
        return
    ensure_shared(certs)
    if not any(env.get(k) for k in ("PUBSUB_TLS_CA", "PUBSUB_TLS_CERT", "PUBSUB_TLS_KEY")):
        env.update(client_files(certs, *SHARED))


# --- commands ----------------------------------------------------------------------------------
def command_for(role: str, args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The argv the container runs for `role` (extra `args` are appended)."""
    if role == "supervisor":
        ref = listen_ref(role, env)
        return ["pubsub", "supervisor", "--listen", ref, "--data", data_dir(role, env),
                *tls_args(role, ref, env), *args]
    if role == "node":
        directory = data_dir(role, env)
        add_topics(directory, split_topics(env.get("PUBSUB_TOPICS", "")))
        ref = listen_ref(role, env)
        return ["pubsub", "node", "--listen", ref, "--supervisor", supervisor_ref(env),
                "--data", directory, *tls_args(role, ref, env), *args]
    if role == "broker":
        # A SCOT broker's address comes from its topology file (PUBSUB_BROKER_TOPOLOGY,
        # "addresses"; use names the containers resolve), its id from PUBSUB_BROKER_ID.
        listen = ["--listen", env["PUBSUB_LISTEN"]] if env.get("PUBSUB_LISTEN") else []
        if certs_dir(env) is not None:
            if not listen:
                raise EntrypointError(
                    "a broker with PUBSUB_CERTS_DIR needs PUBSUB_LISTEN: its reference, which "
                    "its certificate names")
            return ["pubsub", "broker", *listen, *tls_args(role, listen[1], env), *args]
        return ["pubsub", "broker", *listen, *args]
    if role == "analysis":
        run_dir = env.get("PUBSUB_RUN_DIR") or DEFAULT_RUN_DIR
        os.makedirs(os.path.join(run_dir, "events"), exist_ok=True)
        extra = shlex.split(env.get("PUBSUB_ANALYSIS_ARGS", ""))
        return ["pubsub", "analyze", run_dir, "--stream", *extra, *args]
    raise EntrypointError(f"unknown role {role!r}")


def health(role: str, env: Mapping[str, str]) -> int:
    """0 when the daemon of `role` in this container answers a status request.

    Asks directly with the client library (no `pubsub status` subprocess, no CLI import),
    so the check stays quick on a loaded machine.
    """
    import asyncio

    from pubsub.kernel.control import Reply, StatusRequest
    from pubsub.runtime.client import RequestError, request

    ref = listen_ref(role, env)
    try:
        reply = asyncio.run(request(ref, StatusRequest(), HEALTH_TIMEOUT))
    except RequestError as exc:
        print(f"{role} {ref}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(reply, Reply):
        print(f"{role} {ref}: answered status with {reply.kind}", file=sys.stderr)
        return 1
    print(f"{role} {ref}: answering")
    return 0


ROLES = ("supervisor", "node", "broker", "analysis")


def main(argv: Sequence[str]) -> int:
    env = os.environ
    if not argv:
        argv = ["pubsub", "--help"]
    try:
        if argv[0] == "client-bundle":
            if len(argv) != 2:
                raise EntrypointError("usage: pubsub-entrypoint client-bundle NAME")
            sys.stdout.buffer.write(client_bundle(argv[1], env))
            sys.stdout.buffer.flush()
            return 0
        if argv[0] not in ROLES:
            client_env(env)  # a client command, or the healthcheck: the shared certificate
        if argv[0] == "health":
            if len(argv) != 2 or argv[1] not in ("supervisor", "node"):
                raise EntrypointError("usage: pubsub-entrypoint health supervisor|node")
            return health(argv[1], env)
        command = command_for(argv[0], argv[1:], env) if argv[0] in ROLES else list(argv)
    except EntrypointError as exc:
        print(f"pubsub-entrypoint: {exc}", file=sys.stderr)
        return 2
    if argv[0] in ROLES:
        print(f"pubsub-entrypoint: {' '.join(command)}", file=sys.stderr, flush=True)
    try:
        os.execvp(command[0], command)  # replaces this process: the daemon gets the signals
    except OSError as exc:
        print(f"pubsub-entrypoint: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
