"""Certificates for a local cluster, created on the fly (`LocalCluster(tls=True)`).

`ClusterCerts.create(directory, refs)` makes a cluster CA in `directory`, a certificate for
every daemon reference (role and reference in its subject, `pubsub.runtime.identity`) and
one client certificate; `daemon_args` gives a daemon its ``--tls-*`` flags and
`client_env` is the ``PUBSUB_TLS_*`` environment of a client using the client certificate;
`install_client_env` puts it into this process's environment (for the launcher's own
queries and the ``pubsub`` commands it runs) until `restore_env`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pubsub.runtime.identity import file_stem, issue, make_ca, write_pair

#: The name in the client certificate of a local cluster.
CLIENT_NAME = "localcluster"


@dataclass
class ClusterCerts:
    """The CA and the certificate/key files of one cluster."""

    directory: Path
    ca: Path
    pairs: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    _saved: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: Path, refs: Mapping[str, str]) -> ClusterCerts:
        """A CA in `directory` and a certificate for each reference of `refs` (reference ->
        role: supervisor, node or broker), plus the client certificate."""
        ca_cert, ca_key = make_ca()
        ca, _ = write_pair(directory, "ca", ca_cert, ca_key)
        certs = cls(directory, ca)
        for name, role in (*refs.items(), (CLIENT_NAME, "client")):
            cert, key = issue(ca_cert, ca_key, role, name)
            certs.pairs[name] = write_pair(directory, file_stem(role, name), cert, key)
        return certs

    def daemon_args(self, ref: str) -> list[str]:
        """The ``--tls-ca/--tls-cert/--tls-key`` flags of the daemon at `ref`."""
        cert, key = self.pairs[ref]
        return ["--tls-ca", str(self.ca), "--tls-cert", str(cert), "--tls-key", str(key)]

    def client_env(self) -> dict[str, str]:
        """``PUBSUB_TLS_*`` of a client that presents the cluster's client certificate."""
        cert, key = self.pairs[CLIENT_NAME]
        return {"PUBSUB_TLS_CA": str(self.ca), "PUBSUB_TLS_CERT": str(cert), "PUBSUB_TLS_KEY": str(key)}

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
