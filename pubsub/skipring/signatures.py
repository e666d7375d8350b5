"""Signed publications, without I/O: batch signatures over Merkle trees, and their check.

Issue 13, item 4.  An Ed25519 signature costs about 40 µs to make and 130 µs to check here,
more than a node's whole budget per publication, so a publication is not signed alone:

* **Leaf.**  Each publication's *leaf digest* is BLAKE2b-256 of ``0x00`` and the msgpack of
  ``[topic, publisher, seq, prev, published_ms, msg_id, key, payload]`` -- every field a
  node stores and delivers (`leaf_digest`).
* **Batch.**  The publishing node signs what it issues together (one group commit, or the
  publications of one outgoing message): it builds a Merkle tree over their leaves
  (inner node = BLAKE2b-256 of ``0x01 || left || right``; an odd node out at a level is
  carried up unchanged), signs ``DOMAIN || root`` once with its Ed25519 key (`sign_batch`),
  and gives each publication a *proof* (`Publication.proof`)::

      key id (32: SHA-256 of the raw public key) | signature (64) |
      directions (4: bit i set when sibling i is on the left) | siblings (32 each, leaf upwards)

* **Check** (`Verifier.check`).  A node recomputes the leaf, walks the siblings up to the
  root and checks the signature of that root with the key the key id names -- once: every
  hash it computed on the way is remembered as *authenticated under that key id*, so the
  next publication of the same batch stops at the first hash already known (usually after
  one or two hashes) and never checks the signature again.  So a batch of k publications
  costs each node one Ed25519 check and about 2k hashes.  The memory of authenticated
  hashes is bounded (`MAX_AUTHENTICATED`; emptied when full, which only costs re-checks).
  Stopping early is sound: reaching a remembered hash from a different leaf would need a
  second preimage of BLAKE2b.
* **Keys.**  `Verifier.add_key` binds a key id to the publisher reference whose
  certificate carries that key (the daemon checks the certificate against the cluster CA,
  `pubsub.node.signing`); a publication whose key belongs to another reference is refused.
  A node may hold several keys (a restarted node with a new certificate: key rotation),
  each publication names its own.  `Verifier.revoke` refuses a key from then on,
  whatever it signed and whenever (publications stored before stay where they are).

Reasons a publication is refused (`REASONS`): ``unsigned``, ``bad_proof`` (a proof that does
not parse), ``unknown_key``, ``revoked_key``, ``wrong_publisher`` (the key is another
node's), ``bad_signature`` (the root the proof leads to is not what the key signed: the
signature, the payload or any covered field was altered).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.messages import Publication

#: What a signature covers before the root: a batch of publications, format 1.
DOMAIN = b"pubsub publications v1\x00"
HASH = 32
KEY_ID = 32
SIGNATURE = 64
#: Bytes of a proof before its siblings.
HEAD = KEY_ID + SIGNATURE + 4
#: Most siblings in a proof (batches of up to 2^24 publications).
MAX_DEPTH = 24
#: Longest proof.
MAX_PROOF_BYTES = HEAD + MAX_DEPTH * HASH
#: Hashes remembered as authenticated at most.
MAX_AUTHENTICATED = 1 << 16
REASONS = ("unsigned", "bad_proof", "unknown_key", "revoked_key", "wrong_publisher", "bad_signature")

_blake = hashlib.blake2b
_pack = msgpack.Packer(use_bin_type=True).pack


def leaf_digest(topic: Topic, p: Publication) -> bytes:
    """The leaf of `p` published in `topic` (see the module docstring)."""
    data = _pack([topic, p.publisher, p.seq, p.prev, p.published_ms, p.msg_id, p.key, p.payload])
    return _blake(b"\x00" + data, digest_size=HASH).digest()


def _inner(left: bytes, right: bytes) -> bytes:
    return _blake(b"\x01" + left + right, digest_size=HASH).digest()


def merkle(leaves: Sequence[bytes]) -> tuple[bytes, list[tuple[int, list[bytes]]]]:
    """The root over `leaves` and, per leaf, its (directions, siblings) up to the root."""
    if not leaves:
        raise ValueError("a Merkle tree needs at least one leaf")
    paths: list[tuple[int, list[bytes]]] = [(0, []) for _ in leaves]
    level = list(leaves)
    members = [[i] for i in range(len(leaves))]  # the leaves under each node of the level
    while len(level) > 1:
        up: list[bytes] = []
        up_members: list[list[int]] = []
        for j in range(0, len(level) - 1, 2):
            left, right = level[j], level[j + 1]
            for i in members[j]:
                paths[i][1].append(right)
            for i in members[j + 1]:
                bits, siblings = paths[i]
                paths[i] = (bits | 1 << len(siblings), siblings)
                siblings.append(left)
            up.append(_inner(left, right))
            up_members.append(members[j] + members[j + 1])
        if len(level) % 2:
            up.append(level[-1])
            up_members.append(members[-1])
        level, members = up, up_members
    return level[0], paths


def make_proof(key_id: bytes, signature: bytes, bits: int, siblings: Iterable[bytes]) -> bytes:
    return key_id + signature + bits.to_bytes(4, "big") + b"".join(siblings)


def sign_batch(
    items: Sequence[tuple[Topic, Publication]], key_id: bytes, sign: Callable[[bytes], bytes]
) -> bytes:
    """Sign `items` as one batch (`sign` makes an Ed25519 signature of its argument) and set
    each publication's proof; returns the root."""
    root, paths = merkle([leaf_digest(topic, p) for topic, p in items])
    signature = sign(DOMAIN + root)
    for (_, p), (bits, siblings) in zip(items, paths, strict=True):
        p.proof = make_proof(key_id, signature, bits, siblings)
    return root


@dataclass(slots=True)
class Key:
    """A publisher's public key, as a certificate of the cluster binds it."""

    ref: Ref
    public: Ed25519PublicKey


@dataclass
class Verifier:
    """The keys a node knows and the hashes it has authenticated (module docstring)."""

    keys: dict[bytes, Key] = field(default_factory=dict)
    revoked: set[bytes] = field(default_factory=set)
    #: Hash -> the key id under whose signature it was authenticated.
    authenticated: dict[bytes, bytes] = field(default_factory=dict)
    #: Ed25519 checks made (one per batch per node, ideally).
    signature_checks: int = 0

    def add_key(self, key_id: bytes, ref: Ref, public: Ed25519PublicKey) -> bool:
        """Bind `key_id` to `ref`; False (and nothing changed) when it is revoked or already
        bound to another key."""
        if key_id in self.revoked:
            return False
        known = self.keys.get(key_id)
        if known is not None:
            return known.ref == ref and known.public == public
        self.keys[key_id] = Key(ref, public)
        return True

    def revoke(self, key_ids: Iterable[bytes]) -> None:
        """Refuse these keys from now on (and forget what they authenticated)."""
        new = set(key_ids) - self.revoked
        if not new:
            return
        self.revoked |= new
        for key_id in new:
            self.keys.pop(key_id, None)
        self.authenticated = {h: k for h, k in self.authenticated.items() if k not in new}

    def remember(self, key_id: bytes, hashes: Iterable[bytes]) -> None:
        """Hashes authenticated under `key_id` (a node's own batches, say)."""
        memory = self.authenticated
        if len(memory) > MAX_AUTHENTICATED:
            memory.clear()
        for h in hashes:
            memory[h] = key_id

    def check(self, topic: Topic, p: Publication) -> str | None:
        """Why `p` (published in `topic`) is refused, or None when its proof holds."""
        proof = p.proof
        if not proof:
            return "unsigned"
        size = len(proof)
        if size < HEAD or size > MAX_PROOF_BYTES or (size - HEAD) % HASH:
            return "bad_proof"
        key_id = proof[:KEY_ID]
        if key_id in self.revoked:
            return "revoked_key"
        key = self.keys.get(key_id)
        if key is None:
            return "unknown_key"
        if key.ref != p.publisher:
            return "wrong_publisher"
        memory = self.authenticated
        h = leaf_digest(topic, p)
        if memory.get(h) == key_id:
            return None
        seen = [h]
        bits = int.from_bytes(proof[KEY_ID + SIGNATURE : HEAD], "big")
        for i, at in enumerate(range(HEAD, size, HASH)):
            sibling = proof[at : at + HASH]
            h = _inner(sibling, h) if bits >> i & 1 else _inner(h, sibling)
            if memory.get(h) == key_id:
                self.remember(key_id, seen)
                return None
            seen.append(h)
        self.signature_checks += 1
        try:
            key.public.verify(proof[KEY_ID : KEY_ID + SIGNATURE], DOMAIN + h)
        except InvalidSignature:
            return "bad_signature"
        self.remember(key_id, seen)
        return None
