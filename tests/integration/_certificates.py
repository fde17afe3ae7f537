"""Self-signed certificates for TLS tests, made with openssl as an operator would."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["certificate"]


def certificate(folder: Path, name: str, host: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate and key for ``host``, valid one day."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", f"/CN={host}", "-addext", f"subjectAltName=DNS:{host}",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
