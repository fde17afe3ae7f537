"""Certificates for TLS inside a deployment: a private CA and the certificates it issues.

Ray's own gRPC (``RAY_USE_TLS``: every node, worker and Serve replica, so the gateway's
calls to its stages) and Serve's gRPC proxy run mutual TLS by default. Both need a
certificate per node that names the address peers dial (Ray checks the host name of
every connection, and a Kubernetes pod's IP is known only when it starts), signed by a
CA every peer trusts:

- :func:`issue_ca` makes that CA (``tribunal tls ca``; the Helm chart makes its own
  with ``genCA``);
- :func:`issue_certificate` issues a node's certificate for its names and IPs, usable as
  server and as client (Ray presents the same one both ways): a local ``tribunal serve
  deploy`` issues one for 127.0.0.1 at start, a Kubernetes pod's init container one for
  the pod's IP (``tribunal tls issue``);
- :func:`local_tls` is what ``tribunal serve deploy`` uses: a CA, the node's certificate
  and a client certificate for ``tribunal ask`` under the Ray temp dir, made once (0600).

Private keys are written 0600 and never logged. Made with ``cryptography`` (the project's
signing library too): ECDSA P-256, SHA-256.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CertificateFiles",
    "LocalTls",
    "issue_ca",
    "issue_certificate",
    "local_tls",
    "ray_tls_env",
]

_LOCAL_NAMES = ("localhost",)
_LOCAL_IPS = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class CertificateFiles:
    """A PEM certificate and its private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class LocalTls:
    """The files of a local deployment's TLS (:func:`local_tls`)."""

    ca: Path
    node: CertificateFiles
    client: CertificateFiles


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    path.chmod(0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def issue_ca(folder: Path, *, name: str = "tribunal", days: int = 3650) -> CertificateFiles:
    """A new CA in ``folder``: ``ca.crt`` and ``ca.key`` (0600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    files = CertificateFiles(folder / "ca.crt", folder / "ca.key")
    _write_private(files.key, _key_pem(key))
    _write_private(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    return files


def issue_certificate(
    ca: CertificateFiles,
    cert: Path,
    key: Path,
    *,
    common_name: str,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    days: int = 365,
) -> CertificateFiles:
    """A certificate signed by ``ca`` for these names and IPs, for servers and clients.

    Raises:
        ValueError: an entry of ``ip_addresses`` is not an IP address.
    """
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    # Helm's genCA makes RSA keys, tribunal tls ca EC ones.
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{ca.key}: the CA key must be an RSA or EC private key")
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    signed = builder.sign(ca_key, hashes.SHA256())
    _write_private(key, _key_pem(leaf_key))
    _write_private(cert, signed.public_bytes(serialization.Encoding.PEM))
    return CertificateFiles(cert, key)


def _valid_for(cert: Path, days: float) -> bool:
    try:
        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    except (OSError, ValueError):
        return False
    return loaded.not_valid_after_utc > _now() + datetime.timedelta(days=days)


def local_tls(folder: Path) -> LocalTls:
    """The TLS files of a deployment on this machine, under ``folder`` (made when missing
    or expiring within a day): a CA, the node's certificate for 127.0.0.1 / ::1 /
    localhost, and a client certificate (``tribunal ask --tls-cert``)."""
    ca = CertificateFiles(folder / "ca.crt", folder / "ca.key")
    node = CertificateFiles(folder / "node.crt", folder / "node.key")
    client = CertificateFiles(folder / "client.crt", folder / "client.key")
    fresh = all(_valid_for(files.cert, 1.0) and files.key.is_file() for files in (ca, node, client))
    if not fresh:
        ca = issue_ca(folder, name="tribunal local")
        issue_certificate(
            ca,
            node.cert,
            node.key,
            common_name="tribunal-node",
            dns_names=_LOCAL_NAMES,
            ip_addresses=_LOCAL_IPS,
        )
        issue_certificate(
            ca, client.cert, client.key, common_name="tribunal-client", dns_names=_LOCAL_NAMES
        )
    return LocalTls(ca=ca.cert, node=node, client=client)


def ray_tls_env(ca: Path, node: CertificateFiles) -> dict[str, str]:
    """The variables that turn on Ray's mutual TLS (every Ray process reads them at start)."""
    return {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": str(node.cert),
        "RAY_TLS_SERVER_KEY": str(node.key),
        "RAY_TLS_CA_CERT": str(ca),
    }
