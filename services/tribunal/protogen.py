"""Generate (or check) the Python stubs in ``tribunal/v1`` from ``protos/``.

``python -m tribunal.protogen OUT`` writes ``OUT/tribunal/v1/*_pb2*.py(i)``;
``--check`` only compares a fresh generation with what is there and exits 1
on any difference (CI: the committed stubs must match the protos).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

__all__ = ["diff_stubs", "generate", "main"]

REPO = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO / "protos"
_PATTERNS = ("*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py")


def generate(out: Path, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Run protoc (grpcio-tools) on every proto under ``proto_root/tribunal/v1``."""
    from grpc_tools import protoc  # dev-time dependency

    protos = sorted(
        str(p.relative_to(proto_root)) for p in (proto_root / "tribunal/v1").glob("*.proto")
    )
    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(
        [
            "protoc",
            f"-I{proto_root}",
            f"-I{include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *protos,
        ]
    )
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return sorted(p for pattern in _PATTERNS for p in (out / "tribunal/v1").glob(pattern))


def diff_stubs(committed_root: Path, proto_root: Path = PROTO_ROOT) -> list[str]:
    """Names of stub files that differ from (or are missing in) a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p.read_bytes() for p in generate(Path(tmp), proto_root)}
    committed_dir = committed_root / "tribunal/v1"
    committed = {
        p.name: p.read_bytes() for pattern in _PATTERNS for p in committed_dir.glob(pattern)
    }
    return sorted(
        name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tribunal.protogen", description=__doc__)
    parser.add_argument("out", type=Path, help="source root that holds tribunal/v1 (services)")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    args = parser.parse_args(argv)
    if args.check:
        drift = diff_stubs(args.out)
        if drift:
            print("stubs out of date (run `make protos` and commit): " + ", ".join(drift))
            return 1
        print("stubs in sync with protos/")
        return 0
    written = generate(args.out)
    print(f"generated {len(written)} files into {args.out / 'tribunal/v1'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
