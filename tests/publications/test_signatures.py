"""Batch signatures over Merkle trees (`pubsub.publications.signatures`): every publication of a
batch verifies, one Ed25519 check per batch, and any altered field, proof or publisher is
refused with its reason."""

from __future__ import annotations

import hashlib
import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Publication, PublicationKey, Spread
from pubsub.publications.signatures import HASH, HEAD, KEY_ID, Verifier, leaf_digest, paths, sign_batch, tree
from pubsub.publications.trie import publication_key

T = Topic("news")
A = Ref("127.0.0.1:1001")
B = Ref("127.0.0.1:1002")


def key_pair() -> tuple[ed25519.Ed25519PrivateKey, bytes]:
    key = ed25519.Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).digest()[:KEY_ID]


def pubs(n: int, publisher: Ref = A, first: int = 0) -> list[Publication]:
    out = []
    for seq in range(first, first + n):
        payload = f"payload {seq}".encode()
        out.append(Publication(PublicationKey(publication_key(publisher, seq, payload)), publisher, seq, payload,
                               1_700_000_000_000 + seq, seq - 1, f"id-{seq}"))
    return out


def signed(n: int, publisher: Ref = A) -> tuple[list[Publication], Verifier, bytes]:
    key, key_id = key_pair()
    batch = pubs(n, publisher)
    sign_batch([(T, p) for p in batch], key_id, key.sign, os.urandom(16))
    verifier = Verifier()
    assert verifier.add_key(key_id, publisher, key.public_key())
    return batch, verifier, key_id


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_every_publication_of_a_batch_verifies_with_one_signature_check(n: int) -> None:
    batch, verifier, _ = signed(n)
    assert [verifier.check(T, p) for p in batch] == [None] * n
    assert verifier.signature_checks == 1
    depth = max(0, (n - 1).bit_length())
    assert all(len(p.proof) <= HEAD + HASH * depth for p in batch)
    if n == 64:
        assert len(batch[0].proof) == 103 + 16 * 6  # format 2: 199 bytes (format 1: 292)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_a_whole_batch_in_one_message_is_checked_at_once(n: int) -> None:
    batch, verifier, _ = signed(n)
    mixed = list(reversed(batch))  # any order
    assert verifier.check_all(T, mixed) == [None] * n
    assert verifier.signature_checks == 1 and verifier.checked_in_batches == n and verifier.checked_alone == 0
    assert verifier.check_all(T, batch[: n // 2 + 1]) == [None] * (n // 2 + 1)  # part of it: alone, root known
    assert verifier.signature_checks == 1


def test_check_all_says_which_publication_of_a_batch_fails() -> None:
    batch, verifier, _ = signed(8)
    batch[5].payload = b"forged"
    assert verifier.check_all(T, batch) == [None] * 5 + ["bad_signature"] + [None] * 2
    assert "bad_signature" in verifier.check_all(T, batch)  # a second time, with the root known


def test_check_all_refuses_an_authentic_publication_whose_siblings_were_altered() -> None:
    """The batch rebuilds from its leaves, but a proof that would not verify alone is not
    accepted (it would be stored and sent on by anti-entropy)."""
    batch, verifier, _ = signed(8)
    p = batch[2]
    p.proof = p.proof[:-1] + bytes([p.proof[-1] ^ 1])
    assert verifier.check_all(T, batch) == [None, None, "bad_proof"] + [None] * 5
    assert Verifier(keys=dict(verifier.keys)).check(T, p) == "bad_signature"


def test_check_all_with_a_duplicate_or_a_missing_index_checks_alone() -> None:
    batch, verifier, _ = signed(4)
    assert verifier.check_all(T, [batch[0], batch[0], batch[1], batch[2]]) == [None] * 4
    assert verifier.checked_in_batches == 0 and verifier.checked_alone == 4


def test_a_proof_must_have_exactly_its_path() -> None:
    batch, verifier, _ = signed(5)
    p = batch[1]
    p.proof = p.proof + b"\x00" * HASH  # one sibling too many
    assert verifier.check(T, p) == "bad_proof"
    p.proof = p.proof[: -2 * HASH]  # one too few
    assert verifier.check(T, p) == "bad_proof"


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9])
def test_merkle_paths_lead_to_the_root(n: int) -> None:
    salt = bytes(range(16))
    leaves = [hashlib.sha256(bytes([i])).digest()[:16] for i in range(n)]
    levels = tree(leaves, salt)
    root = levels[-1][0]
    for index, (leaf, tail) in enumerate(zip(leaves, paths(levels), strict=True)):
        h, i, size = leaf, index, n
        siblings = [tail[j : j + 16] for j in range(0, len(tail), 16)]
        while size > 1:
            if i ^ 1 < size:
                sibling = siblings.pop(0)
                data = b"\x01" + (sibling + h if i & 1 else h + sibling)
                h = hashlib.blake2b(data, digest_size=16, salt=salt).digest()
            i, size = i >> 1, (size + 1) >> 1
        assert h == root and not siblings
    with pytest.raises(ValueError):
        tree([], salt)


def test_a_second_verifier_in_another_order_agrees() -> None:
    batch, verifier, key_id = signed(20)
    other = Verifier()
    other.add_key(key_id, A, verifier.keys[key_id].public)
    assert [other.check(T, p) for p in reversed(batch)] == [None] * 20
    assert other.signature_checks == 1


@pytest.mark.parametrize(
    "field, value",
    [("payload", b"forged"), ("seq", 999), ("prev", 7), ("published_ms", 5), ("msg_id", "other"),
     ("key", PublicationKey(b"\x00" * 16))],
)
def test_an_altered_field_is_refused(field: str, value: object) -> None:
    batch, verifier, _ = signed(8)
    setattr(batch[3], field, value)
    results = [verifier.check(T, p) for p in batch]
    assert results[3] == "bad_signature"
    assert results[:3] + results[4:] == [None] * 7


def test_an_altered_topic_signature_or_path_is_refused() -> None:
    batch, verifier, _ = signed(8)
    assert verifier.check(Topic("other"), batch[0]) == "bad_signature"
    p = batch[1]
    p.proof = p.proof[:40] + bytes([p.proof[40] ^ 1]) + p.proof[41:]  # inside the signature
    assert verifier.check(T, p) == "bad_signature"
    q = batch[5]
    q.proof = q.proof[:-1] + bytes([q.proof[-1] ^ 1])  # the last sibling
    assert verifier.check(T, q) == "bad_signature"


def test_a_verified_batch_does_not_vouch_for_an_altered_copy() -> None:
    """The cache of authenticated hashes: once the batch verified, an altered copy of one of
    its publications still fails (its leaf differs, and no remembered hash is reached)."""
    batch, verifier, _ = signed(16)
    assert all(verifier.check(T, p) is None for p in batch)
    forged = Publication(batch[2].key, A, batch[2].seq, b"evil", batch[2].published_ms, batch[2].prev,
                         batch[2].msg_id, batch[2].proof)
    assert verifier.check(T, forged) == "bad_signature"


def test_publisher_unsigned_malformed_unknown_and_revoked() -> None:
    batch, verifier, key_id = signed(4)
    p = batch[0]
    p.publisher = B
    assert verifier.check(T, p) == "wrong_publisher"  # the key is A's
    assert verifier.check(T, pubs(1)[0]) == "unsigned"
    bad = pubs(1)[0]
    bad.proof = b"x" * (HEAD + 5)
    assert verifier.check(T, bad) == "bad_proof"
    assert Verifier().check(T, batch[1]) == "unknown_key"
    verifier.revoke([key_id])
    assert verifier.check(T, batch[1]) == "revoked_key"
    assert not verifier.add_key(key_id, A, ed25519.Ed25519PrivateKey.generate().public_key())


def test_a_publisher_with_two_keys_rotation() -> None:
    old_key, old_id = key_pair()
    new_key, new_id = key_pair()
    old, new = pubs(3), pubs(3, first=3)
    sign_batch([(T, p) for p in old], old_id, old_key.sign, os.urandom(16))
    sign_batch([(T, p) for p in new], new_id, new_key.sign, os.urandom(16))
    verifier = Verifier()
    verifier.add_key(old_id, A, old_key.public_key())
    verifier.add_key(new_id, A, new_key.public_key())
    assert all(verifier.check(T, p) is None for p in old + new)
    assert not verifier.add_key(new_id, B, new_key.public_key())  # a key id binds one reference


def test_proofs_travel_on_the_wire_and_the_hot_path() -> None:
    batch, verifier, _ = signed(5)
    spread = Spread(T, A, 0, 1 << 63, 3, 1, batch)
    decoded = wire.decode(wire.encode(spread)[4:])
    assert isinstance(decoded, Spread)
    assert [p.proof for p in decoded.publications] == [p.proof for p in batch]
    fresh = Verifier(keys=dict(verifier.keys))
    assert all(fresh.check(T, p) is None for p in decoded.publications)


def test_leaf_covers_the_topic() -> None:
    p = pubs(1)[0]
    assert leaf_digest(T, p, bytes(16)) != leaf_digest(Topic("x"), p, bytes(16))
    assert leaf_digest(T, p, bytes(16)) != leaf_digest(T, p, b"\x01" * 16)  # and the salt
