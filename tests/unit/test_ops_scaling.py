"""Scaling one application inside a Serve config, and the status a person reads."""

from __future__ import annotations

from typing import Any

import pytest
from tribunal.core import InvalidArgumentError, NotFoundError
from tribunal.ops import ScaleRequest, apply_scale, format_status
from tribunal.ops._scaling import config_diff, validate_with_serve_schema
from tribunal.ops._serve_rest import config_from_details
from tribunal.ops._status import status_from_serve_details


def _config() -> dict[str, Any]:
    return {
        "proxy_location": "EveryNode",
        "applications": [
            {
                "name": name,
                "route_prefix": None,
                "import_path": f"tribunal.deploy.apps:{name}",
                "args": {"profile": "standard", "settings": {"data_dir": "/data"}},
                "deployments": [
                    {
                        "name": name,
                        "max_ongoing_requests": 64,
                        "autoscaling_config": {
                            "min_replicas": 1,
                            "max_replicas": 4,
                            "target_ongoing_requests": 8,
                        },
                        "ray_actor_options": {"num_cpus": 1, "num_gpus": 0},
                    }
                ],
            }
            for name in ("retrieval", "entailment", "gateway")
        ],
    }


def test_range_change_touches_only_the_named_application() -> None:
    before = _config()
    after = apply_scale(before, ScaleRequest("entailment", max_replicas=12))
    assert before == _config(), "the input is not modified"
    assert after["applications"][0] == before["applications"][0]
    assert after["applications"][2] == before["applications"][2]
    entry = after["applications"][1]["deployments"][0]
    assert entry["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 12,
        "target_ongoing_requests": 8,
    }
    validate_with_serve_schema(after)
    diff = config_diff(before, after, label="x")
    changed = [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert changed == ["-      max_replicas: 4", "+      max_replicas: 12"]


def test_fixed_count_turns_autoscaling_off_and_back() -> None:
    fixed = apply_scale(_config(), ScaleRequest("gateway", replicas=3))
    entry = fixed["applications"][2]["deployments"][0]
    assert entry["num_replicas"] == 3
    # Explicitly null: the application's code sets its own autoscaling, which would
    # otherwise override a plain replica count.
    assert entry["autoscaling_config"] is None
    validate_with_serve_schema(fixed)
    back = apply_scale(fixed, ScaleRequest("gateway", min_replicas=0, max_replicas=2))
    entry = back["applications"][2]["deployments"][0]
    assert "num_replicas" not in entry
    assert entry["autoscaling_config"] == {"min_replicas": 0, "max_replicas": 2}
    validate_with_serve_schema(back)


@pytest.mark.parametrize(
    ("request_", "field", "message"),
    [
        (ScaleRequest("gateway"), "replicas", "say what to change"),
        (ScaleRequest("gateway", replicas=2, max_replicas=3), "replicas", "cannot be combined"),
        (ScaleRequest("gateway", replicas=0), "replicas", "use --min 0"),
        (ScaleRequest("gateway", max_replicas=0), "max", "between 1 and 1000"),
        (ScaleRequest("gateway", min_replicas=5), "min", r"min_replicas \(5\) would exceed"),
        (ScaleRequest("gateway", max_replicas=1, min_replicas=2), "min", "would exceed"),
    ],
)
def test_bad_requests_name_the_field(request_: ScaleRequest, field: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as caught:
        apply_scale(_config(), request_)
    assert caught.value.field == field


def test_unknown_application_or_deployment_lists_the_known_ones() -> None:
    with pytest.raises(NotFoundError, match="applications: retrieval, entailment, gateway"):
        apply_scale(_config(), ScaleRequest("debate", max_replicas=2))
    with pytest.raises(NotFoundError, match="deployments: gateway"):
        apply_scale(_config(), ScaleRequest("gateway", max_replicas=2, deployment="router"))


def test_an_application_without_a_deployment_entry_gets_one() -> None:
    config = _config()
    config["applications"][0]["deployments"] = []
    after = apply_scale(
        config, ScaleRequest("retrieval", replicas=2), deployment_names=["retrieval"]
    )
    assert after["applications"][0]["deployments"] == [
        {"name": "retrieval", "num_replicas": 2, "autoscaling_config": None}
    ]


def _details() -> dict[str, Any]:
    config = _config()
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": "127.0.0.1", "port": 8000},
        "grpc_options": {"port": 9000, "grpc_servicer_functions": []},
        "deploy_mode": "MULTI_APP",
        "applications": {
            app["name"]: {
                "name": app["name"],
                "status": "RUNNING",
                "message": "",
                "deployed_app_config": app,
                "deployments": {
                    app["name"]: {
                        "status": "HEALTHY",
                        "message": "",
                        "target_num_replicas": 2,
                        "deployment_config": app["deployments"][0],
                        "replicas": [{"state": "RUNNING"}, {"state": "STARTING"}],
                    }
                },
            }
            for app in config["applications"]
        },
    }


def test_serve_details_round_trip_to_a_declarative_config_and_a_status() -> None:
    config = config_from_details(_details())
    assert [a["name"] for a in config["applications"]] == ["entailment", "gateway", "retrieval"]
    assert config["grpc_options"]["port"] == 9000
    validate_with_serve_schema(config)
    status = status_from_serve_details(_details(), address="http://127.0.0.1:8265")
    assert status.status == "RUNNING"
    dep = status.applications[0].deployments[0]
    assert (dep.min_replicas, dep.max_replicas, dep.target_replicas, dep.running_replicas) == (
        1,
        4,
        2,
        1,
    )
    table = format_status(status).splitlines()
    assert table[0] == "serve http://127.0.0.1:8265: RUNNING"
    assert table[2].split() == [
        "APPLICATION",
        "STATUS",
        "DEPLOYMENT",
        "DEPL.",
        "STATUS",
        "REPLICAS",
        "TARGET",
        "RUNNING",
    ]
    assert table[3].split() == ["entailment", "RUNNING", "entailment", "HEALTHY", "1..4", "2", "1"]
