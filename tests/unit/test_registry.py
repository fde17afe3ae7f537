"""The service registry and the label modes: one table each, read by everything that
needs them (CLI, Serve config and builders, the gateway's discovery and transports)."""

from __future__ import annotations

import argparse
import importlib
import typing

import grpc
import pytest
from tribunal.cli import build_parser
from tribunal.core import ConfigError, InvalidArgumentError, load_settings
from tribunal.deploy import APPLICATIONS, SERVICES, STAGES, serve_config
from tribunal.deploy._config import GRPC_SERVICER_FUNCTIONS
from tribunal.deploy._registry import service
from tribunal.gateway import LabelMode
from tribunal.gateway._label_modes import LABEL_MODE_STAGES
from tribunal.v1 import gateway_pb2

SIX = ("retrieval", "entailment", "ensemble", "debate", "confidence", "gateway")


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return parser


def test_the_registry_lists_exactly_the_six_services_stages_first() -> None:
    assert tuple(SERVICES) == SIX
    assert SIX[:-1] == STAGES
    assert [name for name, spec in SERVICES.items() if not spec.stage] == ["gateway"]
    assert len({spec.port for spec in SERVICES.values()}) == 6
    assert len({spec.metrics_port for spec in SERVICES.values()}) == 6
    with pytest.raises(ConfigError, match="'nope' is not a Tribunal service; known: retrieval"):
        service("nope")


@pytest.mark.parametrize("name", SIX)
def test_each_entry_names_real_factories_stubs_protos_and_settings(name: str) -> None:
    spec = SERVICES[name]
    servicer_module, _, factory = spec.host_factory.partition(":")
    module = importlib.import_module(servicer_module)
    assert callable(getattr(module, factory))
    # The proto service the registry names is the one the servicer binds.
    assert spec.full_proto_service == module.SERVICE_NAME
    pb2 = importlib.import_module(f"tribunal.v1.{spec.proto}_pb2")
    assert spec.proto_service in pb2.DESCRIPTOR.services_by_name
    grpc_module = importlib.import_module(spec.grpc_module)
    with grpc.insecure_channel("127.0.0.1:1") as channel:  # never dialled: no call is made
        stub = spec.stub(channel)
    assert type(stub) is getattr(grpc_module, f"{spec.proto_service}Stub")
    path, _, function = spec.servicer_function.rpartition(".")
    assert callable(getattr(importlib.import_module(path), function))
    app_module, _, builder = spec.app_builder.partition(":")
    assert callable(getattr(importlib.import_module(app_module), builder))
    settings = load_settings("tiny")
    assert spec.settings_section(settings) is getattr(settings, name)
    assert spec.deployment(settings) is getattr(settings, name).deployment


def test_the_serve_config_and_its_builders_cover_every_registry_entry() -> None:
    from tribunal.deploy import apps

    assert tuple(SERVICES) == APPLICATIONS
    assert set(GRPC_SERVICER_FUNCTIONS) == {s.servicer_function for s in SERVICES.values()}
    config = serve_config(load_settings("tiny"))
    assert [app["name"] for app in config["applications"]] == list(SERVICES)
    for app in config["applications"]:
        module, _, attribute = app["import_path"].partition(":")
        builder = getattr(importlib.import_module(module), attribute)
        assert builder.__name__ == app["name"]  # what Serve resolves the path to
    with pytest.raises(AttributeError, match="no attribute 'ensembel'"):
        _ = apps.ensembel


def test_the_cli_serves_every_registry_entry_on_its_own_ports() -> None:
    from tribunal.commands.serve import server_overrides

    parser = build_parser()
    for name, spec in SERVICES.items():
        args = parser.parse_args(["serve", name])
        assert server_overrides(args, spec, set()) == {
            "port": spec.port,
            "metrics_port": spec.metrics_port,
        }
    # A flag, or a port the settings set, wins over the service's own.
    args = parser.parse_args(["serve", "debate", "--port", "6000"])
    assert server_overrides(args, SERVICES["debate"], {"metrics_port"}) == {"port": 6000}
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "nope"])


def test_the_gateway_transports_and_stage_host_use_the_registry() -> None:
    from tribunal.gateway._grpc_transport import GrpcTransport
    from tribunal.gateway._ray_transport import RayServeTransport
    from tribunal.gateway._wiring import build_stage_host

    assert set(RayServeTransport({}).apps) == set(STAGES)
    GrpcTransport(dict.fromkeys(STAGES, "127.0.0.1:1"), max_message_bytes=1024).close()
    with pytest.raises(ConfigError, match="unknown stages \\['gateway'\\]"):
        GrpcTransport({"gateway": "127.0.0.1:1"}, max_message_bytes=1024)
    # The in-process host binds every stage's proto service (built, not started: no models).
    settings = load_settings("tiny", server={"port": 0, "metrics_port": None})
    host = build_stage_host(settings)
    assert [b.full_name for b in host.bindings] == [
        SERVICES[stage].full_proto_service for stage in STAGES
    ]


def test_label_modes_are_one_table_of_registry_stages() -> None:
    assert set(LABEL_MODE_STAGES) == set(LabelMode)
    for mode, stages in LABEL_MODE_STAGES.items():
        assert stages, mode
        assert set(stages) <= set(STAGES), mode
        assert mode.stages == stages
        assert LabelMode.from_proto(mode.proto) is mode
    proto_modes = set(gateway_pb2.LabelMode.values()) - {gateway_pb2.LABEL_MODE_UNSPECIFIED}
    assert {mode.proto for mode in LabelMode} == proto_modes
    # The setting and the CLI offer exactly these modes.
    from tribunal.core import GatewaySettings

    annotation = GatewaySettings.model_fields["label_mode"].annotation
    assert set(typing.get_args(annotation)) == {mode.value for mode in LabelMode}
    label_run = _subparser(build_parser(), "label", "run")
    [mode_option] = [a for a in label_run._actions if a.dest == "mode"]
    assert list(mode_option.choices or ()) == [mode.value for mode in LabelMode]
    with pytest.raises(InvalidArgumentError, match="not one of cascade, debate, judge"):
        LabelMode.parse("jury")
    with pytest.raises(InvalidArgumentError, match="not a LabelMode"):
        LabelMode.from_proto(99)
