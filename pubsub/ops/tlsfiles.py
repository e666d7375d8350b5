"""Certificates for a local cluster, created on the fly (`LocalCluster(tls=True)`).

`ClusterCerts.create(directory, refs)` makes a cluster CA in `directory`, a certificate for
every daemon reference (role and reference in its subject, `pubsub.runtime.identity`) and
the operator's certificate (role ``admin``: whoever starts a local cluster runs it, joins
and leaves topics included); `issue` makes more (a ``client`` with only the permissions
file's grants, say); `daemon_args` gives a daemon its ``--tls-*`` flags and
`client_env` is the ``PUBSUB_TLS_*`` environment of a client using the operator's certificate;
`install_client_env` puts it into this process's environment (for the launcher's own
queries and the ``pubsub`` commands it runs) until `restore_env`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from pubsub.runtime.certificates import issue, make_ca, write_pair
from pubsub.runtime.identity import file_stem

#: The name in the operator's (admin) certificate of a local cluster.
CLIENT_NAME = "localcluster"


@dataclass
class ClusterCerts:
    """The CA and the certificate/key files of one cluster."""

    directory: Path
    ca: Path
    #: The CA's certificate and key, for `issue`.
    authority: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
    pairs: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    _saved: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: Path, refs: Mapping[str, str]) -> ClusterCerts:
        """A CA in `directory` and a certificate for each reference of `refs` (reference ->
        role: supervisor, node or broker), plus the client certificate."""
        ca_cert, ca_key = make_ca()
        ca, _ = write_pair(directory, "ca", ca_cert, ca_key)
        certs = cls(directory, ca, (ca_cert, ca_key))
        for name, role in (*refs.items(), (CLIENT_NAME, "admin")):
            certs.issue(role, name)
        return certs

    def issue(self, role: str, name: str) -> tuple[Path, Path]:
        """A certificate of `role` `name` from the cluster CA: its certificate and key files
        (also kept in `pairs` under `name`)."""
        ca_cert, ca_key = self.authority
        cert, key = issue(ca_cert, ca_key, role, name)
        self.pairs[name] = write_pair(self.directory, file_stem(role, name), cert, key)
        return self.pairs[name]

    def env_of(self, name: str) -> dict[str, str]:
        """``PUBSUB_TLS_*`` of a client that presents the certificate issued to `name`."""
        cert, key = self.pairs[name]
        return {"PUBSUB_TLS_CA": str(self.ca), "PUBSUB_TLS_CERT": str(cert), "PUBSUB_TLS_KEY": str(key)}

    def daemon_args(self, ref: str) -> list[str]:
        """The ``--tls-ca/--tls-cert/--tls-key`` flags of the daemon at `ref`."""
        cert, key = self.pairs[ref]
        return ["--tls-ca", str(self.ca), "--tls-cert", str(cert), "--tls-key", str(key)]

    def client_env(self) -> dict[str, str]:
        """``PUBSUB_TLS_*`` of a client that presents the operator's certificate."""
        return self.env_of(CLIENT_NAME)

    def install_client_env(self) -> None:
        """Put `client_env` into os.environ (once), remembering what it replaces."""
        if self._saved:
            return
        for name, value in self.client_env().items():
            self._saved[name] = os.environ.get(name)
            os.environ[name] = value

    def restore_env(self) -> None:
        """Undo `install_client_env`."""
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved.clear()
