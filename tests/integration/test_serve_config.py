"""``tribunal serve config``: the Serve config of a profile, checked offline by Serve's schema;
every application builder named in it builds (no cluster needed)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema
from tribunal.cli import main
from tribunal.core import ConfigError, load_settings
from tribunal.deploy import APPLICATIONS, serve_config
from tribunal.deploy import validate_serve_config as validate
from tribunal.deploy._config import GRPC_SERVICER_FUNCTIONS


def _written(tmp_path: Path, *flags: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "serve.yaml"
    assert main(["serve", "config", "--profile", "tiny", "-o", str(out), *flags]) == 0
    config: dict = yaml.safe_load(out.read_text())  # type: ignore[type-arg]
    return config


def test_the_written_config_is_valid_for_serve_and_lists_every_servicer(tmp_path: Path) -> None:
    config = _written(tmp_path, "--grpc-port", "9100")
    schema = ServeDeploySchema.model_validate(config)
    assert [app.name for app in schema.applications] == list(APPLICATIONS)
    assert schema.grpc_options.port == 9100
    assert schema.http_options.host == "127.0.0.1"
    assert config["grpc_options"]["grpc_servicer_functions"] == list(GRPC_SERVICER_FUNCTIONS)
    for path in GRPC_SERVICER_FUNCTIONS:  # the proxy imports these by name
        module, _, function = path.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function))
    settings = load_settings("tiny")
    for app in config["applications"]:
        (deployment,) = app["deployments"]
        options = getattr(settings, app["name"]).deployment
        assert deployment["name"] == app["name"]
        assert deployment["max_ongoing_requests"] >= options.max_batch_size
        assert deployment["ray_actor_options"]["num_cpus"] == options.num_cpus
        assert deployment["autoscaling_config"]["max_replicas"] == options.max_replicas
        assert app["import_path"] == f"tribunal.deploy.apps:{app['name']}"
        assert app["args"]["settings"]["model_dir"] == str(settings.model_dir)
    # The tiny profile's replicas fit the 2-core machines with room to scale.
    total = sum(
        a["deployments"][0]["ray_actor_options"]["num_cpus"] for a in config["applications"]
    )
    assert total <= 1.5


def test_overrides_reach_the_applications_and_their_options(tmp_path: Path) -> None:
    config = _written(
        tmp_path,
        *("--set", "llm.n_threads=1", "--set", "confidence.deployment.max_replicas=3"),
        *("--apps", "confidence,gateway"),
    )
    assert [a["name"] for a in config["applications"]] == ["confidence", "gateway"]
    confidence = config["applications"][0]
    assert confidence["deployments"][0]["autoscaling_config"]["max_replicas"] == 3
    assert confidence["args"]["settings"]["llm"] == {"n_threads": 1}


def test_every_builder_builds_its_application_from_the_args(tmp_path: Path) -> None:
    from tribunal.deploy import apps

    config = _written(tmp_path)
    for app in config["applications"]:
        builder = getattr(apps, app["import_path"].rpartition(":")[2])
        assert type(builder(app["args"])).__name__ == "Application"
    assert apps.settings_from_args({"settings": {"gateway": {"top_k": 3}}}).gateway.top_k == 3


def test_bad_configs_and_arguments_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings("tiny")
    config = serve_config(settings)
    config["applications"].append(dict(config["applications"][0]))
    with pytest.raises(ConfigError, match="multiple configs"):
        validate(config)
    with pytest.raises(ConfigError, match="unknown applications"):
        serve_config(settings, apps=("retrieval", "nope"))
    assert main(["serve", "config", "--set", "no-equals-sign"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["serve", "deploy"]) == 2
    assert "--config" in capsys.readouterr().err
