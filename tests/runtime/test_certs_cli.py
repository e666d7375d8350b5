"""`pubsub certs` as an operator runs it (the click commands, in process): a CA, issued
pairs, fingerprints, and the refusals that keep a working key from being lost."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pubsub.cli.main import main


def certs(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, ["certs", *args])
    return done.exit_code, done.output


def test_ca_then_issue_writes_a_pair_per_name(tmp_path: Path) -> None:
    assert certs("ca", str(tmp_path))[0] == 0
    code, out = certs("issue", str(tmp_path), "node", "127.0.0.1:7101", "127.0.0.1:7102")
    assert code == 0, out
    for port in (7101, 7102):
        assert (tmp_path / f"node-127.0.0.1_{port}.crt").exists()
        assert (tmp_path / f"node-127.0.0.1_{port}.key").stat().st_mode & 0o777 == 0o600


def test_issue_refuses_to_overwrite_a_key_and_writes_nothing(tmp_path: Path) -> None:
    certs("ca", str(tmp_path))
    certs("issue", str(tmp_path), "client", "alice")
    alice = (tmp_path / "client-alice.key").read_bytes()
    code, out = certs("issue", str(tmp_path), "client", "bob", "alice")
    assert code == 1
    assert f"{tmp_path / 'client-alice.key'} exists; use --force to replace it" in out
    assert (tmp_path / "client-alice.key").read_bytes() == alice
    assert not (tmp_path / "client-bob.key").exists()  # nothing of the refused call is written
    code, out = certs("issue", "--force", str(tmp_path), "client", "alice")
    assert code == 0, out
    assert (tmp_path / "client-alice.key").read_bytes() != alice


def test_issue_refuses_a_name_given_twice(tmp_path: Path) -> None:
    certs("ca", str(tmp_path))
    code, out = certs("issue", str(tmp_path), "client", "carol", "carol")
    assert code == 1 and "carol given more than once" in out
    assert not (tmp_path / "client-carol.key").exists()


def test_ca_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    certs("ca", str(tmp_path))
    key = (tmp_path / "ca.key").read_bytes()
    code, out = certs("ca", str(tmp_path))
    assert code == 1 and "use --force to replace the CA" in out
    assert (tmp_path / "ca.key").read_bytes() == key


def test_fingerprint_names_the_key_and_explains_the_ca(tmp_path: Path) -> None:
    certs("ca", str(tmp_path))
    certs("issue", str(tmp_path), "client", "alice")
    code, out = certs("fingerprint", str(tmp_path / "client-alice.crt"))
    assert code == 0, out
    digest, _, identity = out.strip().partition("  ")
    assert len(digest) == 64 and int(digest, 16) >= 0 and identity == "client alice"
    code, out = certs("fingerprint", str(tmp_path / "ca.crt"))
    assert code == 1 and "a CA certificate; fingerprints name the keys" in out
    assert "reissue" not in out
