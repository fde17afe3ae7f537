"""The ``tribunal`` CLI: help everywhere, clean errors, exit codes."""

from __future__ import annotations

import pytest
from tribunal.cli import build_parser, main


def _subcommand_paths() -> list[list[str]]:
    paths = []
    parser = build_parser()
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            paths.append([name])
            for inner in sub._subparsers._group_actions if sub._subparsers else []:
                paths.extend([name, leaf] for leaf in inner.choices)
    return paths


@pytest.mark.parametrize("path", _subcommand_paths(), ids=" ".join)
def test_every_subcommand_has_help(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    assert "usage: tribunal" in capsys.readouterr().out


def test_bad_setting_is_reported_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIBUNAL_SERVER__GRACE_SECONDS", "-1")
    assert main(["config", "show"]) == 2
    err = capsys.readouterr().err
    assert "server.grace_seconds" in err
    assert "TRIBUNAL_SERVER__GRACE_SECONDS" in err
    assert "Traceback" not in err


def test_config_show_prints_the_effective_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIBUNAL_SERVER__PORT", "50777")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "port: 50777" in out
    assert "profile: tiny" in out


def test_unknown_artifact_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "install", "--only", "gpt-5"]) == 2
    assert "unknown artifact(s): gpt-5" in capsys.readouterr().err
