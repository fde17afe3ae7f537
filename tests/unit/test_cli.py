"""The ``tribunal`` CLI: help everywhere, clean errors, exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tribunal.cli import COMMANDS, build_parser, main


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


def test_the_command_table_names_what_each_module_registers() -> None:
    every = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(every) == list(dict.fromkeys(COMMANDS))
    for name in COMMANDS:
        # A run naming one command registers that command's module only.
        alone = build_parser([name, "--help"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert name in alone
        assert set(alone) < set(every)
    # Global options and their values before the command are skipped.
    chosen = build_parser(["--log-level", "INFO", "--log-format", "json", "kb", "stats"])
    assert set(chosen._subparsers._group_actions[0].choices) == {"kb"}  # type: ignore[union-attr]


def test_a_command_imports_only_its_own_libraries() -> None:
    """``tribunal config`` starts without the model libraries that other commands load."""
    script = (
        "import sys; from tribunal.cli import main\n"
        "main(['config', 'profiles'])\n"
        "heavy = sorted(m for m in ('sklearn', 'bm25s', 'faiss', 'torch', 'sqlalchemy') "
        "if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


def test_an_unknown_command_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["lable", "run"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'lable'" in err
    assert "'label'" in err
