"""Signed publications, without I/O: batch signatures over Merkle trees, and their check.

Issue 13, item 4.  An Ed25519 signature costs about 40 µs to make and 120 µs to check here,
more than a node's whole budget per publication, so a publication is not signed alone:

* **Batch.**  The publishing node signs what it issues together (one group commit, or the
  publications of one outgoing message).  It draws a random 16-byte *salt* for the batch,
  computes each publication's *leaf* (`leaf_digest`: BLAKE2b-128, salted, of ``0x00`` and
  the msgpack of ``[topic, publisher, seq, prev, published_ms, msg_id, key, payload]`` --
  every field a node stores and delivers), builds a Merkle tree over the leaves in order
  (inner node = BLAKE2b-128, salted, of ``0x01 || left || right``; an odd node out at a
  level is carried up unchanged, so the tree's shape follows from the batch size alone) and
  signs ``DOMAIN || size || salt || root`` once with its Ed25519 key (`sign_batch`).
* **Proof** (`Publication.proof`, format 2), self-contained, stored with the publication
  and carried with it everywhere (broadcast, anti-entropy, hand-over)::

      0x02 | key id (16) | signature (64) | salt (16) | size (3) | index (3) |
      siblings (16 each, leaf upwards: exactly the levels where the index has a sibling)

  The first 100 bytes (up to the size) are the same for every publication of a batch
  (`batch_head`).  For a batch of 32: 183 bytes (format 1 was 260: 32-byte key id and
  hashes, no salt).
* **Check** (`Verifier.check_all`, for the publications of one message).  Publications
  whose proofs share a batch head and together are the whole batch -- the broadcast's
  common case: a publisher's Spread carries its commit's batch, and relays forward it
  unchanged -- are checked at once: the node rebuilds the tree from their leaves (size - 1
  hashes), checks the signature of the root once, and compares each proof's siblings with
  the rebuilt tree (a bytes comparison; a proof with altered siblings is refused even
  though its publication is authentic, so that no node stores or passes on a proof that
  would not verify alone).  Any other publication (part of a batch, anti-entropy's repairs)
  is checked alone (`Verifier.check`): the node walks its siblings up to the root and checks
  the signature of that root unless the root is already *authenticated under that key id*
  -- the root of every batch a node signed or checked is remembered, so the rest of a batch
  costs a walk of about log2(size) hashes each and no further signature check.  So a batch
  costs each node one Ed25519 check and about one or two hashes per publication.  The
  memory is bounded (`MAX_AUTHENTICATED`; emptied when full, which only costs re-checks).
  A proof must be exact: its length must be that of its index's path, every sibling is
  hashed up to the root.
* **Why 128-bit hashes and 16-byte key ids.**  Forging against an honest signer needs a
  publication whose path reaches a hash the signer authenticated: a second preimage, 2^128
  work (2^112 against the 2^16 remembered hashes).  A collision (2^64 birthday work) would
  only help an attacker who could make the signer sign one of two colliding leaves chosen in
  advance -- a client choosing payloads, say -- and the salt rules that out: it is drawn
  after the batch's contents are fixed and hashed into every leaf and inner node, so the
  colliding pair cannot be prepared before the signer picks it, and afterwards only second
  preimages remain.  (A malicious signer needs no collision: it can sign anything under its
  own key anyway.)  The key id is the first 16 bytes of the SHA-256 of the raw public key
  (the key's fingerprint, ``pubsub certs fingerprint``, is all 32 in hex); a key id is bound
  to one key and one reference by the certificate that carries it (`Verifier.add_key`
  refuses to rebind it), so a colliding key -- 2^128 work for a given victim -- could at
  most be refused, never speak for another node.
* **Keys.**  `Verifier.add_key` binds a key id to the publisher reference whose
  certificate carries that key (the daemon checks the certificate against the cluster CA,
  `pubsub.node.signing`); a publication whose key belongs to another reference is refused.
  A node may hold several keys (a restarted node with a new certificate: key rotation),
  each publication names its own.  `Verifier.revoke` refuses a key from then on,
  whatever it signed and whenever (publications stored before stay where they are).

Reasons a publication is refused (`REASONS`): ``unsigned``, ``bad_proof`` (a proof that does
not parse, or siblings that differ from its batch's tree), ``unknown_key``, ``revoked_key``,
``wrong_publisher`` (the key is another node's), ``bad_signature`` (the root the proof leads
to is not what the key signed: the signature, the payload or any covered field was altered).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Publication

if TYPE_CHECKING:  # cryptography loads with the keys, under TLS: the hot path's decoder needs only the sizes
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

#: What a signature covers before the size, salt and root: a batch of publications, format 2.
DOMAIN = b"pubsub publications v2\x00"
FORMAT = b"\x02"
_FORMAT = FORMAT[0]
HASH = 16
KEY_ID = 16
SIGNATURE = 64
SALT = 16
#: Bytes of the batch size and of the index.
COUNT = 3
_KEY_AT = 1
_SIGNATURE_AT = _KEY_AT + KEY_ID
_SALT_AT = _SIGNATURE_AT + SIGNATURE
_SIZE_AT = _SALT_AT + SALT
_INDEX_AT = _SIZE_AT + COUNT
#: Bytes every proof of a batch shares (format .. size).
BATCH_HEAD = _INDEX_AT
#: Bytes of a proof before its siblings.
HEAD = _INDEX_AT + COUNT
#: Most publications in a batch, and so most siblings in a proof (24).
MAX_BATCH = (1 << 8 * COUNT) - 1
MAX_DEPTH = 24
#: Longest proof.
MAX_PROOF_BYTES = HEAD + MAX_DEPTH * HASH
#: Hashes remembered as authenticated at most.
MAX_AUTHENTICATED = 1 << 16
REASONS = ("unsigned", "bad_proof", "unknown_key", "revoked_key", "wrong_publisher", "bad_signature")

_blake = hashlib.blake2b
_pack = msgpack.Packer(use_bin_type=True).pack


def key_id_of(fingerprint: bytes) -> bytes:
    """The key id of a key whose fingerprint (SHA-256 of the raw public key) is given."""
    return fingerprint[:KEY_ID]


def key_of(proof: bytes) -> bytes:
    """The key id a (non-empty) proof names."""
    return proof[_KEY_AT:_SIGNATURE_AT]


def _hasher(salt: bytes) -> Any:
    """BLAKE2b-128 salted with `salt`, to be copied for each hash (faster than passing the
    parameters every time)."""
    return _blake(digest_size=HASH, salt=salt)


def _leaf(topic: Topic, p: Publication, base: Any) -> bytes:
    h = base.copy()
    h.update(b"\x00" + _pack([topic, p.publisher, p.seq, p.prev, p.published_ms, p.msg_id, p.key, p.payload]))
    return h.digest()  # type: ignore[no-any-return]


def leaf_digest(topic: Topic, p: Publication, salt: bytes) -> bytes:
    """The leaf of `p` published in `topic`, in a batch salted with `salt` (module docstring)."""
    return _leaf(topic, p, _hasher(salt))


def _inner(left: bytes, right: bytes, base: Any) -> bytes:
    h = base.copy()
    h.update(b"\x01" + left + right)
    return h.digest()  # type: ignore[no-any-return]


def _signed(size: int, salt: bytes, root: bytes) -> bytes:
    """What the signature of a batch covers."""
    return DOMAIN + size.to_bytes(COUNT, "big") + salt + root


def tree(leaves: Sequence[bytes], salt: bytes) -> list[list[bytes]]:
    """The levels of the Merkle tree over `leaves`, leaves first, the root's level last."""
    if not leaves:
        raise ValueError("a Merkle tree needs at least one leaf")
    base = _hasher(salt)
    level = list(leaves)
    levels = [level]
    while len(level) > 1:
        up = [_inner(level[j], level[j + 1], base) for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            up.append(level[-1])
        levels.append(up)
        level = up
    return levels


def paths(levels: list[list[bytes]]) -> list[bytes]:
    """The siblings of every leaf, leaf upwards, concatenated (top-down: each node's path is
    its sibling and its parent's path, so about 2 * leaves concatenations in all)."""
    tails = [b""]
    for level in reversed(levels[:-1]):
        n = len(level)
        tails = [level[j ^ 1] + tails[j >> 1] if j ^ 1 < n else tails[j >> 1] for j in range(n)]
    return tails


def sign_batch(
    items: Sequence[tuple[Topic, Publication]],
    key_id: bytes,
    sign: Callable[[bytes], bytes],
    salt: bytes,
) -> bytes:
    """Sign `items` as one batch (`sign` makes an Ed25519 signature of its argument; `salt`:
    `SALT` random bytes, drawn by the caller for this batch) and set each publication's
    proof; returns the root.  At most `MAX_BATCH` items."""
    size = len(items)
    if not 0 < size <= MAX_BATCH:
        raise ValueError(f"a batch holds 1..{MAX_BATCH} publications, not {size}")
    if len(salt) != SALT:
        raise ValueError(f"a salt is {SALT} bytes")
    base = _hasher(salt)
    levels = tree([_leaf(topic, p, base) for topic, p in items], salt)
    root = levels[-1][0]
    head = FORMAT + key_id + sign(_signed(size, salt, root)) + salt + size.to_bytes(COUNT, "big")
    for i, ((_, p), tail) in enumerate(zip(items, paths(levels), strict=True)):
        p.proof = head + i.to_bytes(COUNT, "big") + tail
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
    #: Publications checked with their whole batch at once, and alone.
    checked_in_batches: int = 0
    checked_alone: int = 0

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

    def _key(self, head: bytes) -> tuple[Key | None, str | None]:
        """The key a proof's head names, or why it is refused."""
        key_id = head[_KEY_AT:_SIGNATURE_AT]
        if key_id in self.revoked:
            return None, "revoked_key"
        key = self.keys.get(key_id)
        return (None, "unknown_key") if key is None else (key, None)

    def _verify(self, key_id: bytes, proof: bytes, count: int, root: bytes) -> bool:
        """Whether the signature in `proof` is `key_id`'s of the batch with that root."""
        from cryptography.exceptions import InvalidSignature  # loaded already: the key is cryptography's

        self.signature_checks += 1
        try:
            self.keys[key_id].public.verify(
                proof[_SIGNATURE_AT:_SALT_AT], _signed(count, proof[_SALT_AT:_SIZE_AT], root)
            )
        except InvalidSignature:
            return False
        return True

    def check(self, topic: Topic, p: Publication) -> str | None:
        """Why `p` (published in `topic`) is refused, or None when its proof holds."""
        proof = p.proof
        if not proof:
            return "unsigned"
        size = len(proof)
        if size < HEAD or size > MAX_PROOF_BYTES or (size - HEAD) % HASH or proof[0] != _FORMAT:
            return "bad_proof"
        key, reason = self._key(proof)
        if key is None:
            return reason
        if key.ref != p.publisher:
            return "wrong_publisher"
        count = int.from_bytes(proof[_SIZE_AT:_INDEX_AT], "big")
        index = int.from_bytes(proof[_INDEX_AT:HEAD], "big")
        if index >= count:
            return "bad_proof"
        self.checked_alone += 1
        key_id = proof[_KEY_AT:_SIGNATURE_AT]
        salt = proof[_SALT_AT:_SIZE_AT]
        base = _hasher(salt)
        h = _leaf(topic, p, base)
        at, n = HEAD, count
        while n > 1:
            if index ^ 1 < n:
                if at >= size:
                    return "bad_proof"
                sibling = proof[at : at + HASH]
                at += HASH
                h = _inner(sibling, h, base) if index & 1 else _inner(h, sibling, base)
            index >>= 1
            n = (n + 1) >> 1
        if at != size:
            return "bad_proof"
        if self.authenticated.get(h) != key_id:
            if not self._verify(key_id, proof, count, h):
                return "bad_signature"
            self.remember(key_id, (h,))
        return None

    def check_all(self, topic: Topic, publications: Sequence[Publication]) -> list[str | None]:
        """`check` for each of `publications` (published in `topic`); whole batches among them
        are checked at once (module docstring)."""
        results: list[str | None] = [None] * len(publications)
        batches: dict[bytes, list[int]] = {}
        for i, p in enumerate(publications):
            proof = p.proof
            size = len(proof)
            if not proof:
                results[i] = "unsigned"
            elif size < HEAD or size > MAX_PROOF_BYTES or (size - HEAD) % HASH or proof[0] != _FORMAT:
                results[i] = "bad_proof"
            else:
                batches.setdefault(proof[:BATCH_HEAD], []).append(i)
        for head, members in batches.items():
            key, reason = self._key(head)
            if key is None:
                for i in members:
                    results[i] = reason
                continue
            count = int.from_bytes(head[_SIZE_AT:], "big")
            ref = key.ref
            whole = len(members) == count and all(publications[i].publisher == ref for i in members)
            if whole:
                by_index = {publications[i].proof[_INDEX_AT:HEAD]: i for i in members}
                order = [by_index.get(n.to_bytes(COUNT, "big"), -1) for n in range(count)]
                whole = -1 not in order and self._whole(topic, head, order, publications, results)
            if not whole:
                for i in members:
                    results[i] = self.check(topic, publications[i])
        return results

    def _whole(
        self, topic: Topic, head: bytes, order: list[int], publications: Sequence[Publication],
        results: list[str | None],
    ) -> bool:
        """Check a whole batch at once (`order`: the position in `publications` of each index);
        False when its root does not verify (then each is checked alone, to say which fail)."""
        key_id = head[_KEY_AT:_SIGNATURE_AT]
        salt = head[_SALT_AT:_SIZE_AT]
        base = _hasher(salt)
        levels = tree([_leaf(topic, publications[i], base) for i in order], salt)
        root = levels[-1][0]
        if self.authenticated.get(root) != key_id:
            if not self._verify(key_id, head, len(order), root):
                return False
            self.remember(key_id, (root,))
        self.checked_in_batches += len(order)
        for i, tail in zip(order, paths(levels), strict=True):
            if publications[i].proof[HEAD:] != tail:
                results[i] = "bad_proof"
        return True
