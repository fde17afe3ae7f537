"""``tribunal tls ca|issue``: the certificates of TLS inside a deployment.

``ca --out DIR`` makes a private CA (``ca.crt``, ``ca.key``); ``issue`` signs a
certificate with it for the names and IPs a node is dialled by, usable as server and as
client. The Helm chart's init container runs ``issue`` in every Ray pod, for the pod's
IP, so Ray's mutual TLS can check each peer's address (docs/security.md).
``tribunal serve deploy`` makes its own under the Ray temp dir and needs neither.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
from pathlib import Path

from ..core import InvalidArgumentError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("tls", help="make a CA and the certificates of a deployment's TLS")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    ca = actions.add_parser("ca", help="a new private CA: OUT/ca.crt and OUT/ca.key (0600)")
    ca.add_argument("--out", type=Path, required=True, help="folder to write into")
    ca.add_argument("--days", type=int, default=3650, help="validity (default 3650)")
    ca.set_defaults(func=_ca)
    issue = actions.add_parser(
        "issue", help="a certificate signed by the CA for these names and IPs (server and client)"
    )
    issue.add_argument("--ca-cert", type=Path, required=True, help="the CA's certificate (PEM)")
    issue.add_argument("--ca-key", type=Path, required=True, help="the CA's private key (PEM)")
    issue.add_argument("--out", type=Path, required=True, help="folder: tls.crt, tls.key, ca.crt")
    issue.add_argument("--name", default="tribunal-node", help="the certificate's common name")
    issue.add_argument("--dns", action="append", default=[], help="a DNS name (repeatable)")
    issue.add_argument("--ip", action="append", default=[], help="an IP address (repeatable)")
    issue.add_argument("--days", type=int, default=365, help="validity (default 365)")
    issue.set_defaults(func=_issue)


def _ca(args: argparse.Namespace) -> int:
    from ..deploy import issue_ca

    files = issue_ca(args.out, days=args.days)
    print(json.dumps({"ca_cert": str(files.cert), "ca_key": str(files.key)}))
    return 0


def _issue(args: argparse.Namespace) -> int:
    from ..deploy import CertificateFiles, issue_certificate

    for path in (args.ca_cert, args.ca_key):
        if not path.is_file():
            raise InvalidArgumentError(f"{path}: no such file", field="ca")
    for ip in args.ip:
        try:
            ipaddress.ip_address(ip)
        except ValueError as exc:
            raise InvalidArgumentError(f"--ip {ip!r} is not an IP address", field="ip") from exc
    if not args.dns and not args.ip:
        raise InvalidArgumentError("give the names peers dial: --dns and/or --ip", field="dns")
    files = issue_certificate(
        CertificateFiles(args.ca_cert, args.ca_key),
        args.out / "tls.crt",
        args.out / "tls.key",
        common_name=args.name,
        dns_names=args.dns,
        ip_addresses=args.ip,
        days=args.days,
    )
    ca_copy = args.out / "ca.crt"
    ca_copy.write_bytes(args.ca_cert.read_bytes())
    print(json.dumps({"cert": str(files.cert), "key": str(files.key), "ca": str(ca_copy)}))
    return 0
