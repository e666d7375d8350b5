"""Who a TLS peer is: the identity a cluster certificate names, and its check against Hello.

A cluster's certificates are issued by its own CA (`pubsub.runtime.certificates`;
``pubsub certs``).  Each names one identity in its subject:

* ``OU`` (organizational unit): the role -- ``supervisor``, ``node`` or ``broker`` for a
  daemon, ``client`` or ``admin`` for whoever runs the client library or the CLI;
* ``CN`` (common name): for a daemon its reference ``host:port`` (the address it listens on
  and claims in its Hello), for a client or an admin a free name.

`hello_problem` is the one rule binding a connection to its certificate: a connection that
says ``Hello(ref, role="peer")`` must hold a daemon certificate naming exactly that ref; a
client connection (``Hello(ref=None, role="client")``) may hold any certificate of the
cluster's CA.  Everything here is pure (no sockets, no cryptography: reading certificates
is `pubsub.runtime.certificates`'s, loaded only with TLS), so it is tested directly
(tests/runtime/test_identity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pubsub.kernel import registry, wire

#: Roles of daemons, those of the registered modes (the skip ring's supervisor and node, the
#: SCOT broker): their certificate's CN is their reference.
DAEMON_ROLES = registry.daemon_roles()
#: Every role a certificate may name.
ROLES = (*DAEMON_ROLES, "client", "admin")


class IdentityError(ValueError):
    """A certificate or a name that cannot be an identity of the cluster (one line)."""


@dataclass(frozen=True)
class Identity:
    """The role and name (a reference for a daemon) a certificate names."""

    role: str
    name: str

    def __str__(self) -> str:
        return f"{self.role} {self.name}"


def check_name(role: str, name: str) -> str:
    """`name` if it may be the CN of a `role` certificate; IdentityError otherwise."""
    if role not in ROLES:
        raise IdentityError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    if role in DAEMON_ROLES:
        try:
            wire.validate_ref(name)
        except wire.WireError:
            raise IdentityError(f"a {role} certificate names its reference HOST:PORT, not {name!r}") from None
    elif not name or len(name) > 64 or not name.isprintable():
        raise IdentityError(f"a {role} name is 1-64 printable characters, not {name!r}")
    return name


def hello_problem(identity: Identity | None, role: str, ref: str | None) -> str | None:
    """Why a connection whose certificate names `identity` may not say Hello(`ref`, `role`),
    or None if it may.  `identity` None means a certificate that names no identity."""
    if identity is None:
        return "the certificate names no identity of this cluster"
    if role == "peer":
        if identity.role not in DAEMON_ROLES:
            return f"a {identity.role} certificate ({identity.name}) cannot speak as a peer daemon"
        if ref != identity.name:
            return f"Hello claims {ref!r} but the certificate names {identity}"
    return None


def file_stem(role: str, name: str) -> str:
    """The file name (without .crt / .key) of the certificate of `role` `name`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f"{role}-{safe}"


