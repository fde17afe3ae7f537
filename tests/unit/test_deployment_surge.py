"""A restart starts each replacement before the old replica stops, unless told not to."""

from __future__ import annotations

import pytest
from tribunal.core import DeploymentSettings, load_settings
from tribunal.deploy import serve_config


def test_every_application_of_the_serve_config_surges_a_restart() -> None:
    config = serve_config(load_settings("tiny"))
    surge = {
        deployment["name"]: deployment["max_surge_percent"]
        for app in config["applications"]
        for deployment in app["deployments"]
    }
    assert surge == dict.fromkeys(
        ("retrieval", "entailment", "ensemble", "debate", "confidence", "gateway"), 100
    )


def test_an_operator_without_room_for_one_more_replica_turns_it_off() -> None:
    assert DeploymentSettings(max_surge_percent=0).ray_options()["max_surge_percent"] == 0
    with pytest.raises(ValueError, match="less than or equal to 100"):
        DeploymentSettings(max_surge_percent=150)
