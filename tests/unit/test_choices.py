"""Each choice list is defined once: the settings, the commands' choices and the code agree,
and ``tribunal calibrate`` takes its defaults from the ``confidence`` settings."""

from __future__ import annotations

import argparse
import typing
from typing import Any

import pytest
from tribunal.cli import build_parser
from tribunal.commands.calibrate import calibration_config
from tribunal.confidence import RISK_METHODS, CalibrationConfig
from tribunal.confidence._kinds import CALIBRATORS
from tribunal.core import ConfigError, load_settings
from tribunal.core.settings import (
    ConfidenceSettings,
    EnsembleSettings,
    GatewaySettings,
)
from tribunal.ensemble._artifact import AGGREGATORS
from tribunal.gateway import LabelMode
from tribunal.jobs._plan import fit_plan


def _option(*path: str, dest: str) -> argparse.Action:
    parser = build_parser()
    for name in path:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    [action] = [a for a in parser._actions if a.dest == dest]
    return action


def _setting(section: type[Any], name: str) -> tuple[str, ...]:
    return typing.get_args(section.model_fields[name].annotation)


CALIBRATOR_KINDS = ("platt", "isotonic", "temperature", "monotone")
RISK_METHOD_NAMES = ("clopper-pearson", "ltt", "ltt-hb", "sgr")


@pytest.mark.parametrize(
    ("command", "dest", "expected"),
    [
        (("calibrate",), "calibrator", CALIBRATOR_KINDS),
        (("confidence", "fit"), "calibrator", CALIBRATOR_KINDS),
        (("calibrate",), "method", RISK_METHOD_NAMES),
        (("confidence", "fit"), "method", RISK_METHOD_NAMES),
        (("label", "plan"), "method", RISK_METHOD_NAMES),
        (("label", "run"), "mode", ("cascade", "debate", "judge")),
        (("label", "run"), "estimate_modes", ("cascade", "debate", "judge")),
        (("ensemble", "train"), "default_aggregator", ("majority", "weighted", "neural", "latent")),
        (("label", "plan"), "calibrator", ("platt", "isotonic")),
    ],
)
def test_every_command_offers_exactly_the_defined_choices(
    command: tuple[str, ...], dest: str, expected: tuple[str, ...]
) -> None:
    assert tuple(_option(*command, dest=dest).choices or ()) == expected


def test_the_settings_and_the_code_offer_the_same_choices_as_the_commands() -> None:
    assert _setting(ConfidenceSettings, "calibrator") == CALIBRATOR_KINDS == tuple(CALIBRATORS)
    assert _setting(ConfidenceSettings, "method") == RISK_METHOD_NAMES == tuple(RISK_METHODS)
    assert _setting(GatewaySettings, "label_mode") == tuple(LabelMode)
    assert _setting(EnsembleSettings, "aggregator") == tuple(AGGREGATORS)
    plan_kind = typing.get_type_hints(fit_plan)["calibrator_kind"]
    assert typing.get_args(plan_kind) == ("platt", "isotonic")


def test_a_setting_outside_its_choices_is_refused_when_the_settings_load() -> None:
    with pytest.raises(ConfigError, match="confidence.calibrator = 'sigmoid'"):
        load_settings("tiny", confidence={"calibrator": "sigmoid"})
    with pytest.raises(ConfigError, match="confidence.method = 'bonferroni'"):
        load_settings("tiny", confidence={"method": "bonferroni"})


_CALIBRATE = ["calibrate", "--collection", "faq", "--traffic", "traffic.jsonl"]


def test_calibrate_leaves_every_default_to_the_confidence_settings() -> None:
    args = build_parser().parse_args(_CALIBRATE)
    settings = load_settings("tiny")
    config = calibration_config(args, settings)
    expected = settings.confidence
    assert (config.calibrator, config.method, config.alphas, config.delta) == (
        expected.calibrator,
        expected.method,
        expected.alphas,
        expected.delta,
    )
    assert (config.holdout_fraction, config.fit_fraction, config.seed) == (
        expected.holdout_fraction,
        pytest.approx(1 - expected.risk_fraction),
        expected.seed,
    )
    # The library's own defaults are the settings' defaults too.
    assert CalibrationConfig() == CalibrationConfig.from_settings(ConfidenceSettings())


def test_calibrate_follows_a_profile_that_changes_the_settings_and_the_command_line_wins() -> None:
    settings = load_settings(
        "tiny",
        confidence={
            "calibrator": "platt",
            "method": "clopper-pearson",
            "alphas": [0.1],
            "delta": 0.05,
            "holdout_fraction": 0.2,
            "risk_fraction": 0.6,
            "seed": 7,
        },
    )
    config = calibration_config(build_parser().parse_args(_CALIBRATE), settings)
    assert (config.calibrator, config.method, config.alphas, config.delta) == (
        "platt",
        "clopper-pearson",
        (0.1,),
        0.05,
    )
    assert (config.holdout_fraction, config.fit_fraction, config.seed) == (0.2, 0.4, 7)
    given = build_parser().parse_args(
        [*_CALIBRATE, "--method", "sgr", "--alpha", "0.2", "--fit-fraction", "0.5", "--seed", "0"]
    )
    config = calibration_config(given, settings)
    assert (config.method, config.alphas, config.fit_fraction, config.seed) == (
        "sgr",
        (0.2,),
        0.5,
        0,
    )
