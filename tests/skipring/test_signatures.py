"""Batch signatures over Merkle trees (`pubsub.skipring.signatures`): every publication of a
batch verifies, one Ed25519 check per batch, and any altered field, proof or publisher is
refused with its reason."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.messages import Publication, PublicationKey, Spread
from pubsub.skipring.signatures import HEAD, Verifier, leaf_digest, merkle, sign_batch
from pubsub.skipring.trie import publication_key

T = Topic("news")
A = Ref("127.0.0.1:1001")
B = Ref("127.0.0.1:1002")


def key_pair() -> tuple[ed25519.Ed25519PrivateKey, bytes]:
    key = ed25519.Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).digest()


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
    sign_batch([(T, p) for p in batch], key_id, key.sign)
    verifier = Verifier()
    assert verifier.add_key(key_id, publisher, key.public_key())
    return batch, verifier, key_id


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_every_publication_of_a_batch_verifies_with_one_signature_check(n: int) -> None:
    batch, verifier, _ = signed(n)
    assert [verifier.check(T, p) for p in batch] == [None] * n
    assert verifier.signature_checks == 1
    depth = max(0, (n - 1).bit_length())
    assert all(len(p.proof) <= HEAD + 32 * depth for p in batch)


def test_merkle_paths_lead_to_the_root() -> None:
    leaves = [hashlib.sha256(bytes([i])).digest() for i in range(7)]
    root, paths = merkle(leaves)
    for leaf, (bits, siblings) in zip(leaves, paths, strict=True):
        h = leaf
        for i, sibling in enumerate(siblings):
            data = b"\x01" + (sibling + h if bits >> i & 1 else h + sibling)
            h = hashlib.blake2b(data, digest_size=32).digest()
        assert h == root
    with pytest.raises(ValueError):
        merkle([])


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
    sign_batch([(T, p) for p in old], old_id, old_key.sign)
    sign_batch([(T, p) for p in new], new_id, new_key.sign)
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
    assert leaf_digest(T, p) != leaf_digest(Topic("x"), p)
