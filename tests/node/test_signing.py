"""A node's signing (`pubsub.node.signing`): certificates checked against the cluster CA,
batches signed at commit, certificates pushed once per peer and pulled when missing,
refusals counted, revocation, key rotation and the keys kept beside the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.node.signing import Signing, SigningError, parse_fingerprints
from pubsub.node.store import NewRow
from pubsub.publications.messages import (
    HandOver,
    HandOverAck,
    KeyCertificate,
    KeyRequest,
    Publication,
    PublicationKey,
    Publish,
    Spread,
)
from pubsub.publications.trie import publication_key
from pubsub.runtime.certificates import fingerprint, issue, make_ca
from pubsub.skipring.labels import Label
from pubsub.skipring.messages import Check, Contact

T = Topic("news")
A, B, C = Ref("127.0.0.1:2001"), Ref("127.0.0.1:2002"), Ref("127.0.0.1:2003")
CA = make_ca()


def node(ref: Ref, keys_dir: Path | None = None, ca: tuple = CA) -> Signing:
    cert, key = issue(ca[0], ca[1], "node", ref)
    return Signing(ref, CA[0], cert, key, keys_dir)


def der(s: Signing) -> bytes:
    return s.certificates[s.key_id]


def issued(publisher: Ref, n: int, first: int = 0) -> list[Publication]:
    out = []
    for seq in range(first, first + n):
        payload = f"{publisher} {seq}".encode()
        out.append(Publication(PublicationKey(publication_key(publisher, seq, payload)), publisher, seq, payload))
    return out


def test_own_rows_are_signed_as_one_batch_and_others_left_alone() -> None:
    a = node(A)
    mine, theirs = issued(A, 5), issued(B, 2)
    a.sign_rows([NewRow(T, p, "local") for p in mine + theirs])
    assert all(p.proof for p in mine) and not any(p.proof for p in theirs)
    assert a.counters["batches_signed"] == 1 and len({p.proof[:100] for p in mine}) == 1


def test_certificates_travel_once_per_peer_then_publications_verify() -> None:
    a, b = node(A), node(B)
    batch = issued(A, 4)
    a.sign_rows([NewRow(T, p, "local") for p in batch])
    spread = Send(B, Spread(T, A, 0, 1 << 63, 2, 1, batch))
    sends = a.outgoing([spread])
    assert [type(s.msg) for s in sends] == [KeyCertificate, Spread]
    assert a.outgoing([spread]) == [spread]  # B has it now
    for send in sends:
        kept, out = b.incoming(send.msg, A, 0.0)
        if isinstance(send.msg, KeyCertificate):
            assert kept is None and out == []
        else:
            assert kept is send.msg and out == []  # nothing refused: the same message, bytes kept
    assert b.status()["rejected"]["unknown_key"] == 0 and b.verifier.signature_checks == 1
    assert b.status()["checked_in_batches"] == 4 and b.status()["checked_alone"] == 0  # the whole batch at once
    a.forget_peer(B)
    assert [type(s.msg) for s in a.outgoing([spread])] == [KeyCertificate, Spread]


def test_unknown_key_dropped_counted_and_asked_for() -> None:
    a, c = node(A), node(C)
    batch = issued(A, 3)
    a.sign_rows([NewRow(T, p, "local") for p in batch])
    kept, out = c.incoming(Publish(T, batch), B, 10.0)  # from B, which holds A's key
    assert kept is None and c.rejected["unknown_key"] == 3
    assert [(s.dest, type(s.msg)) for s in out] == [(B, KeyRequest)]
    assert c.incoming(Publish(T, batch), B, 10.5)[1] == []  # asked less than a second ago
    request = out[0].msg
    assert isinstance(request, KeyRequest)
    b = node(B)
    b.learn(der(a))
    _, answer = b.incoming(request, C, 11.0)
    assert [(s.dest, type(s.msg)) for s in answer] == [(C, KeyCertificate)]
    c.incoming(answer[0].msg, B, 11.0)
    assert c.incoming(Publish(T, batch), B, 12.0)[0] is not None


def test_altered_publications_are_removed_and_the_rest_handled() -> None:
    a, b = node(A), node(B)
    b.learn(der(a))
    batch = issued(A, 6)
    a.sign_rows([NewRow(T, p, "local") for p in batch])
    batch[1].payload = b"altered"
    batch[4].publisher = B  # signed by A's key, claims B
    kept, _ = b.incoming(Spread(T, A, 0, 1 << 63, 2, 1, batch), A, 0.0)
    assert isinstance(kept, Spread) and [p.seq for p in kept.publications] == [0, 2, 3, 5]
    assert b.rejected["bad_signature"] == 1 and b.rejected["wrong_publisher"] == 1
    unsigned = issued(A, 1, first=10)
    assert b.incoming(Publish(T, unsigned), A, 0.0)[0] is None and b.rejected["unsigned"] == 1
    other = Check(T, Contact(Label("0"), A), Label("1"), "LIN")
    assert b.incoming(other, A, 0.0) == (other, [])


def test_a_refused_handover_is_answered() -> None:
    a, b = node(A), node(B)
    b.learn(der(a))
    (p,) = issued(A, 1)
    kept, out = b.incoming(HandOver(T, A, p, 7), A, 0.0)
    assert kept is None and [s.msg for s in out] == [HandOverAck(T, B, 7, False, "bad_signature")]


def test_own_publication_leaving_before_its_commit_is_signed_on_the_way() -> None:
    a = node(A)
    (p,) = issued(A, 1)
    sends = a.outgoing([Send(C, HandOver(T, A, p, 1))])
    assert p.proof and [type(s.msg) for s in sends] == [KeyCertificate, HandOver]
    c = node(C)
    c.incoming(sends[0].msg, A, 0.0)
    assert c.incoming(sends[1].msg, A, 0.0)[0] is not None


def test_certificates_of_another_ca_or_a_client_are_refused() -> None:
    b = node(B)
    stranger = make_ca()
    cert, _ = issue(stranger[0], stranger[1], "node", A)
    assert "CA" in (b.learn(cert.public_bytes(serialization.Encoding.DER)) or "")
    client, _ = issue(CA[0], CA[1], "client", "alice")
    assert "client" in (b.learn(client.public_bytes(serialization.Encoding.DER)) or "")
    assert b.learn(b"garbage") is not None
    assert b.incoming(KeyCertificate(b"garbage"), A, 0.0) == (None, [])
    assert b.counters["certificates_refused"] == 1 and len(b.verifier.keys) == 1
    with pytest.raises(SigningError):
        Signing(A, CA[0], cert, issue(CA[0], CA[1], "node", A)[1])  # key of another certificate


def test_revocation_and_own_revocation() -> None:
    a, b = node(A), node(B)
    b.learn(der(a))
    batch = issued(A, 2)
    a.sign_rows([NewRow(T, p, "local") for p in batch])
    fp = a.fingerprint
    assert fp == fingerprint(x509.load_der_x509_certificate(der(a)))
    b.revoke([fp])
    assert b.incoming(Publish(T, batch), A, 0.0)[0] is None and b.rejected["revoked_key"] == 2
    assert b.learn(der(a)) is not None  # its certificate is refused from now on
    assert not b.own_key_revoked
    a.revoke([fp])
    assert a.own_key_revoked and a.status()["own_key_revoked"]
    with pytest.raises(SigningError):
        parse_fingerprints("abc")
    assert parse_fingerprints(f" {fp.upper()},{fp} ") == [fp, fp]


def test_key_rotation_keeps_old_publications_verifiable(tmp_path: Path) -> None:
    old = node(A, tmp_path / "a")
    first = issued(A, 2)
    old.sign_rows([NewRow(T, p, "local") for p in first])
    new = node(A, tmp_path / "a")  # the same node restarted with a new certificate
    assert new.key_id != old.key_id and old.key_id in new.certificates  # kept from the first run
    second = issued(A, 2, first=2)
    new.sign_rows([NewRow(T, p, "local") for p in second])
    b = node(B, tmp_path / "b")
    _, out = b.incoming(Publish(T, first + second), A, 0.0)
    request = out[0].msg
    assert isinstance(request, KeyRequest) and len(request.keys) == 2
    for send in new.incoming(request, B, 0.0)[1]:
        b.incoming(send.msg, A, 0.0)
    assert b.incoming(Publish(T, first + second), A, 1.0)[0] is not None
    assert len(list((tmp_path / "b").glob("*.der"))) == 3  # its own and A's two
    again = node(B, tmp_path / "b")  # B restarted: it still knows both of A's keys
    assert {old.key_id, new.key_id} <= set(again.verifier.keys)
