"""``pubsub certs``: a cluster CA and the certificates of its daemons, clients and admins.

    pubsub certs ca DIR                      # DIR/ca.crt, DIR/ca.key (refuses to overwrite)
    pubsub certs issue DIR ROLE NAME...      # DIR/ROLE-NAME.crt, .key for each NAME
                                             # (refuses to overwrite without --force)
    pubsub certs fingerprint CERT...         # the fingerprint of each certificate's key

ROLE is supervisor, node or broker (NAME is the daemon's reference HOST:PORT, the address
it listens on) or client or admin (NAME is free).  The subject names the role (OU) and
the name (CN); `pubsub.runtime.identity` is where this encoding and its checks live.
Issued keys are Ed25519; a node signs its publications with its key, and a revocation
list names keys by their fingerprint (hex SHA-256 of the raw public key,
`pubsub.node.signing`).
"""

from __future__ import annotations

from pathlib import Path

import click
from cryptography import x509

from pubsub.runtime.certificates import fingerprint, identity_of, issue, load_ca, make_ca, write_pair
from pubsub.runtime.identity import ROLES, IdentityError, check_name, file_stem


@click.group("certs")
def certs() -> None:
    """Create a cluster CA and issue TLS certificates (see the README's TLS section)."""


@certs.command("ca")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing CA (every certificate it issued stops working).")
def ca_command(directory: Path, force: bool) -> None:
    """Create the cluster CA in DIRECTORY (ca.crt, ca.key)."""
    if (directory / "ca.key").exists() and not force:
        raise click.ClickException(f"{directory / 'ca.key'} exists; use --force to replace the CA")
    cert, key = make_ca()
    crt, keyfile = write_pair(directory, "ca", cert, key)
    click.echo(f"{crt}\n{keyfile}")


@certs.command("issue")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("role", type=click.Choice(ROLES))
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option("--force", is_flag=True,
              help="Replace existing certificates and keys of these names (a daemon or client "
              "using one must be given the new pair).")
def issue_command(directory: Path, role: str, names: tuple[str, ...], force: bool) -> None:
    """Issue a ROLE certificate for each NAME (a daemon's HOST:PORT, or a client's or an
    admin's name) with the CA in DIRECTORY; prints the files written.  A NAME that already
    has a key there is refused (nothing is written) unless --force."""
    try:
        for name in names:
            check_name(role, name)
        ca_cert, ca_key = load_ca(directory)
    except IdentityError as exc:
        raise click.ClickException(str(exc)) from None
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise click.ClickException(f"{', '.join(repeated)} given more than once")
    stems = {name: file_stem(role, name) for name in names}
    existing = [directory / f"{stem}.key" for stem in stems.values() if (directory / f"{stem}.key").exists()]
    if existing and not force:
        raise click.ClickException(
            f"{', '.join(map(str, existing))} exists; use --force to replace "
            f"{'it' if len(existing) == 1 else 'them'}"
        )
    for name, stem in stems.items():
        cert, key = issue(ca_cert, ca_key, role, name)
        crt, keyfile = write_pair(directory, stem, cert, key)
        click.echo(f"{crt}\n{keyfile}")


@certs.command("fingerprint")
@click.argument("files", nargs=-1, required=True, metavar="CERT...",
                type=click.Path(dir_okay=False, exists=True, path_type=Path))
def fingerprint_command(files: tuple[Path, ...]) -> None:
    """Print the fingerprint of each certificate's key (hex SHA-256 of the raw Ed25519 public
    key: what a revocation list names), then the identity it names."""
    for path in files:
        try:
            cert = x509.load_pem_x509_certificate(path.read_bytes())
            if _is_ca(cert):
                raise click.ClickException(
                    f"{path}: a CA certificate; fingerprints name the keys of the certificates "
                    "`pubsub certs issue` makes"
                )
            click.echo(f"{fingerprint(cert)}  {identity_of(cert)}")
        except (ValueError, IdentityError) as exc:
            raise click.ClickException(f"{path}: {exc}") from None


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False
