"""Signed publications at a node: its signing key, the keys of the others, what it refuses.

Issue 13, item 4.  With TLS on, every publication a node issues is signed and every node
checks every publication before storing, forwarding or delivering it; a cluster without TLS
stays unsigned (nothing here runs).  The batch signatures and their check are
`pubsub.publications.signatures`; this module is the daemon's side:

* **The key is the TLS key.**  A node's certificate (``--tls-cert``, `pubsub certs`) carries
  an Ed25519 key; the node signs with the matching ``--tls-key``.  A key is named by its
  *fingerprint*, the hex SHA-256 of its 32 raw bytes (``pubsub certs fingerprint CERT``); the
  key id in a proof is its first 16 bytes (`pubsub.publications.signatures.key_id_of`).  A node
  with a key of another kind does not start.
* **One signature per batch.**  The group commit (`pubsub.node.commits`) hands each batch's
  rows to `Signing.sign_rows` just before writing them: the publications this node issued
  in that batch are signed together and stored with their proofs.  A publication of ours
  that leaves before its commit (an anti-entropy Publish, a HandOver from a node that does
  not subscribe to the topic) is signed on its way out, with whatever else of ours that
  message carries (`outgoing`).
* **Keys travel as certificates.**  Before the first message carrying publications signed
  by key K goes to peer P, the node sends P the certificate of K (`KeyCertificate`), once
  per peer (again after P was unreachable).  Every node holds the certificate of every key
  whose publications it accepted -- its own, and those it learned -- so it can always pass
  them on.  A receiver checks the certificate against the cluster CA (issued directly by
  it, in its validity period), that it names a node, and binds the key to that node's
  reference.  A node that gets publications signed by a key it does not know (it restarted,
  say) drops them, counts ``unknown_key`` and asks the peer they came from
  (`KeyRequest`, at most once a second per key and peer); anti-entropy brings them back.
  With a data directory the certificates are kept in ``<data>/keys/<key id>.der``
  (the fingerprint's first 32 hex digits) beside the store, so that a restarted node can still vouch for what it stores.
* **Refusals** are counted by reason (`pubsub.publications.signatures.REASONS`), shown in the
  status (``publications.signatures``) and as ``pubsub_signature_rejections_total``.  A
  HandOver whose publication is refused is answered ``bad_signature``.
* **Key rotation.**  A node restarted with a new certificate signs with the new key; its
  earlier publications keep their proofs and key ids, and every node keeps both keys (both
  certificates name the same reference).
* **Revocation.**  `revoke` (fingerprints) refuses a key from then on: its publications are
  refused wherever and whenever they arrive -- the ones made before the revocation too
  (simplest, and a stolen key may have back-dated anything).  What nodes stored before the
  revocation stays stored (and delivered) there; nodes that lack it will not take it.  A
  node whose own key is revoked refuses its clients' publications (``key_revoked``).  The
  list is the permissions file's ``[revoked] keys`` (`pubsub.runtime.permissions`): the node
  daemon calls `revoke` at start and after every reload (SIGHUP); a key taken off the list
  stays revoked until the node restarts.
* **Limits.**  A peer holding a valid node certificate can still make a node spend one
  Ed25519 check (about 130 µs) per forged publication, each under a root of its own; nothing
  here throttles a peer whose publications keep failing (not done).  Publications stored
  before signing existed (no proof) are refused by other nodes, except a node's own, which
  it signs when it sends them.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.node.store import NewRow
from pubsub.publications.messages import (
    CertificateDer,
    HandOver,
    HandOverAck,
    KeyCertificate,
    KeyId,
    KeyRequest,
    Publication,
    PublicationList,
    Publish,
    PublishNew,
    Spread,
)
from pubsub.publications.signatures import MAX_BATCH, REASONS, SALT, Verifier, key_id_of, key_of, sign_batch
from pubsub.runtime.certificates import fingerprint, identity_of
from pubsub.runtime.clienttls import TlsError
from pubsub.runtime.identity import IdentityError
from pubsub.runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)

#: Seconds between two KeyRequests for one key to one peer.
REQUEST_EVERY = 1.0
#: Clock skew tolerated on a certificate's validity period.
SKEW = datetime.timedelta(minutes=5)


class SigningError(TlsError):
    """Signing cannot be set up as configured (one line for the operator; a `TlsError`, as
    the daemon's start-up reports those)."""


def parse_fingerprints(text: str) -> list[str]:
    """Fingerprints from a comma- or space-separated list; SigningError for one that is not
    64 hex digits."""
    out: list[str] = []
    for item in text.replace(",", " ").split():
        item = item.strip().lower()
        if len(item) != 64 or item.strip("0123456789abcdef"):
            raise SigningError(f"{item!r} is not a key fingerprint (64 hex digits: pubsub certs fingerprint CERT)")
        out.append(item)
    return out


def _carried(msg: Message) -> tuple[Topic, Sequence[Publication]] | None:
    """The topic and publications a message carries, if it carries any."""
    if isinstance(msg, (Spread, Publish)):
        return msg.topic, msg.publications
    if isinstance(msg, (PublishNew, HandOver)):
        return msg.topic, (msg.publication,)
    return None


class Signing:
    """A node's signing key, the certificates it knows, and its checks (module docstring)."""

    def __init__(
        self,
        ref: Ref,
        ca: x509.Certificate,
        certificate: x509.Certificate,
        key: ed25519.Ed25519PrivateKey,
        keys_dir: Path | None = None,
    ) -> None:
        self.ref = ref
        self.ca = ca
        self.verifier = Verifier()
        self.keys_dir = keys_dir
        #: Key id -> DER certificate of every key accepted.
        self.certificates: dict[bytes, bytes] = {}
        self._seen: set[bytes] = set()  # SHA-256 of every DER certificate already looked at
        self._sign = key.sign
        self.rejected: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self._sent: dict[Ref, set[bytes]] = {}  # peer -> key ids whose certificate it was sent
        self._asked: dict[tuple[Ref, bytes], float] = {}
        public = key.public_key()
        if certificate.public_key() != public:
            raise SigningError("the TLS key does not belong to the TLS certificate")
        self.fingerprint = fingerprint(public)
        self.key_id = key_id_of(bytes.fromhex(self.fingerprint))
        problem = self.learn(certificate.public_bytes(serialization.Encoding.DER), persist=False)
        if problem is not None:
            raise SigningError(f"this node's own certificate cannot sign publications: {problem}")
        if keys_dir is not None:
            self._load(keys_dir)

    @classmethod
    def from_settings(cls, ref: Ref, settings: RuntimeSettings, data_dir: Path | None) -> Signing | None:
        """The node's signing from its TLS settings (None without TLS); SigningError when
        unusable."""
        if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
            return None
        try:
            ca = x509.load_pem_x509_certificate(settings.tls_ca.read_bytes())
            cert = x509.load_pem_x509_certificate(settings.tls_cert.read_bytes())
            key = serialization.load_pem_private_key(settings.tls_key.read_bytes(), None)
        except (OSError, ValueError, TypeError) as exc:
            raise SigningError(f"cannot read the TLS files for signing: {exc}") from None
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise SigningError(
                f"{settings.tls_key} is not an Ed25519 key: nodes sign their publications with their TLS "
                "key (reissue the certificate: pubsub certs issue --force DIR node REF)"
            )
        return cls(ref, ca, cert, key, None if data_dir is None else data_dir / "keys")

    # ------------------------------------------------------------------ keys
    def learn(self, der: bytes, *, persist: bool = True, now: datetime.datetime | None = None) -> str | None:
        """Accept the certificate `der` of a publication key, or say why not."""
        digest = sha256(der).digest()
        if digest in self._seen:
            return None
        try:
            cert = x509.load_der_x509_certificate(der)
            cert.verify_directly_issued_by(self.ca)
            identity = identity_of(cert)
            key_id = key_id_of(bytes.fromhex(fingerprint(cert)))
        except (ValueError, TypeError, IdentityError) as exc:
            return f"not a node certificate of this cluster: {exc}"
        except Exception as exc:  # noqa: BLE001 - InvalidSignature and the like
            return f"not issued by this cluster's CA ({type(exc).__name__})"
        when = now or datetime.datetime.now(datetime.UTC)
        if not cert.not_valid_before_utc - SKEW <= when <= cert.not_valid_after_utc + SKEW:
            return "the certificate is not valid now"
        if identity.role != "node":
            return f"a {identity.role} certificate does not sign publications"
        public = cert.public_key()
        assert isinstance(public, ed25519.Ed25519PublicKey)
        if not self.verifier.add_key(key_id, Ref(identity.name), public):
            return "the key is revoked" if key_id in self.verifier.revoked else "the key id is taken"
        self._seen.add(digest)
        self.certificates[key_id] = der
        self.counters["keys_learned"] += 1
        if persist and self.keys_dir is not None:
            self._save(key_id, der)
        return None

    def _save(self, key_id: bytes, der: bytes) -> None:
        assert self.keys_dir is not None
        path = self.keys_dir / f"{key_id.hex()}.der"
        try:
            self.keys_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            with tmp.open("wb") as f:
                f.write(der)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        except OSError as exc:
            log.warning("%s: cannot keep the certificate of key %s: %s", self.ref, key_id.hex()[:16], exc)

    def _load(self, directory: Path) -> None:
        for path in sorted(directory.glob("*.der")) if directory.is_dir() else ():
            try:
                problem = self.learn(path.read_bytes(), persist=False)
            except OSError as exc:
                problem = str(exc)
            if problem is not None:
                log.warning("%s: ignoring the kept certificate %s: %s", self.ref, path.name, problem)
        if self.keys_dir is not None and self.key_id.hex() not in {p.stem for p in directory.glob("*.der")}:
            self._save(self.key_id, self.certificates[self.key_id])

    def revoke(self, fingerprints: Iterable[str]) -> None:
        """Refuse the keys with these fingerprints (hex SHA-256 of the raw public key) from now
        on (the permissions file's ``[revoked] keys``)."""
        ids = [key_id_of(bytes.fromhex(f)) for f in parse_fingerprints(" ".join(fingerprints))]
        self.verifier.revoke(ids)
        for key_id in ids:
            self.certificates.pop(key_id, None)
        self._seen.clear()  # a revoked certificate seen again is refused, not skipped

    @property
    def own_key_revoked(self) -> bool:
        return self.key_id in self.verifier.revoked

    # ------------------------------------------------------------------ signing
    def sign(self, items: Sequence[tuple[Topic, Publication]]) -> None:
        """Sign our publications `items` as one batch (one Ed25519 signature)."""
        for start in range(0, len(items), MAX_BATCH):
            chunk = items[start : start + MAX_BATCH]
            root = sign_batch(chunk, self.key_id, self._sign, os.urandom(SALT))
            self.verifier.remember(self.key_id, (root,))
            self.counters["batches_signed"] += 1
            self.counters["publications_signed"] += len(chunk)

    def sign_rows(self, rows: list[NewRow]) -> None:
        """(Before a group commit.)  Sign the unsigned publications we issued among `rows`."""
        me = self.ref
        self.sign([(r.topic, r.publication) for r in rows if not r.publication.proof and r.publication.publisher == me])

    # ------------------------------------------------------------------ the wire
    def incoming(self, msg: Message, peer: Ref | None, now: float) -> tuple[Message | None, list[Send]]:
        """A message from `peer` (None: unknown), before the node handles it: key messages
        are taken here, publications are checked and the refused ones removed.  Returns
        what is left to handle (None: nothing) and what to send."""
        if isinstance(msg, KeyCertificate):
            problem = self.learn(msg.certificate)
            if problem is not None:
                self.counters["certificates_refused"] += 1
                log.warning("%s: refused a key certificate from %s: %s", self.ref, peer, problem)
            return None, []
        if isinstance(msg, KeyRequest):
            if peer is None:
                return None, []
            return None, self._push(peer, msg.keys)
        carried = _carried(msg)
        if carried is None:
            return msg, []
        topic, publications = carried
        results = self.verifier.check_all(topic, publications)
        if not any(results):
            return msg, []
        kept: list[Publication] = []
        unknown: set[bytes] = set()
        for p, reason in zip(publications, results, strict=True):
            if reason is None:
                kept.append(p)
                continue
            self.rejected[reason] += 1
            if reason == "unknown_key":
                unknown.add(key_of(p.proof))
        sends = self._ask(peer, unknown, now)
        if isinstance(msg, HandOver):
            return None, [*sends, Send(msg.sender, HandOverAck(msg.topic, self.ref, msg.request, False,
                                                             "bad_signature"))]
        if not kept:
            return None, sends
        if isinstance(msg, Spread):
            return Spread(msg.topic, msg.sender, msg.start, msg.end, msg.levels, msg.hops, PublicationList(kept)), sends
        if isinstance(msg, Publish):
            return Publish(msg.topic, kept), sends
        return None, sends

    def _ask(self, peer: Ref | None, keys: set[bytes], now: float) -> list[Send]:
        """KeyRequest to `peer` for the keys not asked for in the last second."""
        if peer is None or not keys:
            return []
        wanted = [k for k in keys if now - self._asked.get((peer, k), -REQUEST_EVERY) >= REQUEST_EVERY]
        if not wanted:
            return []
        if len(self._asked) > 10_000:
            self._asked.clear()
        for k in wanted:
            self._asked[(peer, k)] = now
        self.counters["key_requests"] += 1
        return [Send(peer, KeyRequest([KeyId(k) for k in sorted(wanted)[:16]]))]

    def _push(self, peer: Ref, keys: Iterable[bytes]) -> list[Send]:
        """The certificates of `keys` we hold, for `peer`."""
        sent = self._sent.setdefault(peer, set())
        out: list[Send] = []
        for key_id in keys:
            der = self.certificates.get(key_id)
            if der is not None:
                sent.add(key_id)
                out.append(Send(peer, KeyCertificate(CertificateDer(der))))
        self.counters["certificates_sent"] += len(out)
        return out

    def outgoing(self, sends: list[Send]) -> list[Send]:
        """What the node is about to send, completed: our unsigned publications signed, and
        before each message carrying publications the certificates its peer has not had."""
        out: list[Send] | None = None
        me = self.ref
        known: dict[int, set[bytes]] = {}  # id of a publication list (alive all along) -> its keys
        for i, send in enumerate(sends):
            carried = _carried(send.msg)
            if carried is None:
                if out is not None:
                    out.append(send)
                continue
            topic, publications = carried
            keys = known.get(id(publications))  # one batch is often sent to several peers
            if keys is None:
                keys = set()
                unsigned: list[tuple[Topic, Publication]] = []
                for p in publications:
                    proof = p.proof
                    if proof:
                        keys.add(key_of(proof))
                    elif p.publisher == me:
                        unsigned.append((topic, p))
                if unsigned:
                    self.sign(unsigned)
                    keys.add(self.key_id)
                known[id(publications)] = keys
            sent = self._sent.get(send.dest)
            missing = keys if sent is None else keys - sent
            if missing:
                if out is None:
                    out = list(sends[:i])
                out.extend(self._push(send.dest, missing))
            if out is not None:
                out.append(send)
        return sends if out is None else out

    def forget_peer(self, peer: Ref) -> None:
        """`peer` was unreachable: it may have restarted without our certificates."""
        self._sent.pop(peer, None)

    def status(self) -> dict[str, Any]:
        """The status section ``publications.signatures``."""
        return {
            "key": self.fingerprint,
            "own_key_revoked": self.own_key_revoked,
            "keys_known": len(self.verifier.keys),
            "revoked": len(self.verifier.revoked),
            "signature_checks": self.verifier.signature_checks,
            "checked_in_batches": self.verifier.checked_in_batches,
            "checked_alone": self.verifier.checked_alone,
            "rejected": {reason: self.rejected.get(reason, 0) for reason in REASONS},
            **{k: v for k, v in sorted(self.counters.items()) if v},
        }
