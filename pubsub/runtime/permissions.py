"""Who may do what: the permissions file, its rules, and its reload on SIGHUP.

With TLS on, every connection carries the identity its certificate names (role and name,
`pubsub.runtime.identity`).  Peer messages are admitted by role (`pubsub.skipring.admission`);
what a *client* may ask of a daemon is decided here, in the manner of NATS accounts:

* an ``admin`` certificate may do everything, the admin listener's actions included;
* a daemon certificate (``supervisor``, ``node``, ``broker``) may publish and subscribe
  everywhere (a node hands a client's publication over to a member, having checked the
  client itself), and nothing else;
* a ``client`` certificate gets the grants of its name in the permissions file, or the file's
  ``[default]`` grants when its name is not listed.

Without a permissions file a client may publish and subscribe on every topic and nothing else
(`OPEN_GRANTS`): making a node join or leave a topic, and every admin action, needs an admin
certificate or a grant.  Without TLS nothing is checked (there are no identities); an
insecure cluster allows every request to whoever reaches its ports.

The file is TOML::

    [default]                       # clients not listed below (omit: nothing allowed)
    subscribe = ["news.*"]

    [users.alice]                   # the client certificate whose name (CN) is alice
    publish = ["orders", "news.*"]  # topic patterns: fnmatch, as the CLI's (* ? [...])
    subscribe = ["*"]
    join = ["orders"]               # may make a node join or leave these topics
    admin = false                   # admin actions (pubsub chaos, link-rate)

    [revoked]
    keys = ["<hex SHA-256 of a revoked signing key>"]  # `pubsub certs fingerprint CERT`

A daemon loads it at start (``--permissions FILE``, ``PUBSUB_PERMISSIONS``; it needs TLS) and
again on SIGHUP: a file that does not load keeps the rules in force, is logged and counted
(``permissions_reload_error``).  Every check is a pure function of the rules, the identity,
the action and the topic (tested directly in tests/runtime/test_permissions.py); a refused
request gets the code ``permission_denied`` and nothing of it is done.
"""

from __future__ import annotations

import fnmatch
import logging
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pubsub.runtime.identity import DAEMON_ROLES, Identity

log = logging.getLogger(__name__)

#: What a client may ask for, each checked against the topic concerned.
ACTIONS = ("publish", "subscribe", "join")
#: The code of every refusal.
DENIED = "permission_denied"


class PermissionsError(ValueError):
    """A permissions file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Grants:
    """The topic patterns a client may publish on, subscribe to and make nodes join or
    leave, and whether it may take admin actions."""

    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    join: tuple[str, ...] = ()
    admin: bool = False

    def allows(self, action: str, topic: str) -> bool:
        """Whether `action` on `topic` matches one of the grant's patterns."""
        patterns: tuple[str, ...] = getattr(self, action)
        return any(fnmatch.fnmatchcase(topic, p) for p in patterns)


#: A client's grants when the daemon has no permissions file.
OPEN_GRANTS = Grants(publish=("*",), subscribe=("*",))
#: A daemon's grants as a client (hand-overs, relays).
DAEMON_GRANTS = Grants(publish=("*",), subscribe=("*",))


@dataclass(frozen=True)
class Permissions:
    """The rules of one permissions file (or the open rules of none)."""

    users: Mapping[str, Grants] = field(default_factory=dict)
    default: Grants = OPEN_GRANTS
    #: Fingerprints of signing keys no longer trusted.
    revoked_keys: frozenset[str] = frozenset()

    def grants(self, identity: Identity) -> Grants | None:
        """The grants of `identity`; None for an admin (everything)."""
        if identity.role == "admin":
            return None
        if identity.role in DAEMON_ROLES:
            return DAEMON_GRANTS
        return self.users.get(identity.name, self.default)

    def check(self, identity: Identity | None, action: str, topic: str = "") -> str | None:
        """Why `identity` may not take `action` (one of `ACTIONS`, or ``admin``) on `topic`,
        or None when it may.  None identity: a certificate naming no identity."""
        if identity is None:
            return "the certificate names no identity of this cluster"
        grants = self.grants(identity)
        if grants is None:
            return None
        if action == "admin":
            return None if grants.admin else f"{identity} may not take admin actions"
        if grants.allows(action, topic):
            return None
        what = {"publish": "publish on", "subscribe": "subscribe to", "join": "make a node join or leave"}
        return f"{identity} may not {what[action]} {topic!r}"


def parse(doc: Mapping[str, Any], source: str = "the permissions file") -> Permissions:
    """The rules of a decoded permissions document; PermissionsError naming the first
    problem."""
    unknown = set(doc) - {"default", "users", "revoked"}
    if unknown:
        raise PermissionsError(f"{source}: unknown section(s) {', '.join(sorted(unknown))} (default, users, revoked)")
    users_doc = doc.get("users", {})
    if not isinstance(users_doc, Mapping):
        raise PermissionsError(f"{source}: [users] must be a table of [users.NAME] tables")
    users = {str(name): _grants(g, f"{source}: [users.{name}]") for name, g in users_doc.items()}
    default = _grants(doc["default"], f"{source}: [default]") if "default" in doc else Grants()
    revoked = doc.get("revoked", {})
    if not isinstance(revoked, Mapping) or set(revoked) - {"keys"}:
        raise PermissionsError(f"{source}: [revoked] holds only keys = [fingerprints]")
    keys = revoked.get("keys", [])
    if not isinstance(keys, list) or not all(_is_fingerprint(k) for k in keys):
        raise PermissionsError(f"{source}: [revoked] keys must be hex SHA-256 fingerprints (64 hex digits)")
    return Permissions(users=users, default=default, revoked_keys=frozenset(k.lower() for k in keys))


def _grants(doc: object, where: str) -> Grants:
    if not isinstance(doc, Mapping):
        raise PermissionsError(f"{where} must be a table")
    unknown = set(doc) - {*ACTIONS, "admin"}
    if unknown:
        raise PermissionsError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} ({', '.join(ACTIONS)}, admin)")
    lists: dict[str, tuple[str, ...]] = {}
    for action in ACTIONS:
        patterns = doc.get(action, [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise PermissionsError(f"{where}: {action} must be a list of topic patterns")
        lists[action] = tuple(patterns)
    admin = doc.get("admin", False)
    if not isinstance(admin, bool):
        raise PermissionsError(f"{where}: admin must be true or false")
    return Grants(admin=admin, **lists)


def _is_fingerprint(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)


def load(path: Path) -> Permissions:
    """The rules of the permissions file at `path`; PermissionsError (one line) otherwise."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PermissionsError(f"cannot read the permissions file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PermissionsError(f"the permissions file {path} is not TOML: {exc}") from None
    return parse(doc, str(path))


class Authority:
    """The rules in force at one daemon: loaded from its permissions file (or open), reloaded
    on request (SIGHUP), with listeners told of every change (the signature verifier's
    revocation list)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rules = load(path) if path is not None else Permissions()
        self.reloads = 0
        self.reload_errors = 0
        self._listeners: list[Callable[[Permissions], None]] = []

    def check(self, identity: Identity | None, action: str, topic: str = "") -> str | None:
        """`Permissions.check` with the rules in force."""
        return self.rules.check(identity, action, topic)

    def listen(self, callback: Callable[[Permissions], None]) -> None:
        """Call `callback` with the rules now and after every successful reload."""
        self._listeners.append(callback)
        callback(self.rules)

    def reload(self) -> str | None:
        """Load the file again; the problem (one line) when it cannot be, keeping the rules
        in force, else None."""
        if self.path is None:
            return None
        try:
            rules = load(self.path)
        except PermissionsError as exc:
            self.reload_errors += 1
            log.error("permissions not reloaded, the previous rules stay in force: %s", exc)
            return str(exc)
        self.rules = rules
        self.reloads += 1
        log.info(
            "permissions reloaded from %s: %d users, %d revoked keys",
            self.path, len(rules.users), len(rules.revoked_keys),
        )
        for callback in self._listeners:
            callback(rules)
        return None

