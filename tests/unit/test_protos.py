"""The committed stubs match the protos, and the protos pass buf lint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tribunal.protogen import diff_stubs

from tests.conftest import REPO


def test_committed_stubs_match_a_fresh_generation() -> None:
    assert diff_stubs(REPO / "services") == []


def test_drift_is_detected(tmp_path: Path) -> None:
    shutil.copytree(REPO / "protos", tmp_path / "protos")
    proto = tmp_path / "protos/tribunal/v1/common.proto"
    proto.write_text(proto.read_text().replace("string title = 3;", "string heading = 3;"))
    assert diff_stubs(REPO / "services", proto_root=tmp_path / "protos") == [
        "common_pb2.py",
        "common_pb2.pyi",
    ]


def test_buf_lint_passes() -> None:
    buf = Path(sys.executable).with_name("buf")
    done = subprocess.run([str(buf), "lint"], cwd=REPO / "protos", capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
