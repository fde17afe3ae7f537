"""Retrieval and the matcher on one loopback gRPC server, and gateway settings that call
it: how the lab's long recordings reach the stages once, chunk after chunk."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tribunal.core import Settings
    from tribunal.core.server import ServiceHost

__all__ = ["loopback_stages"]


def loopback_stages(settings: Settings) -> tuple[ServiceHost, Settings]:
    """Start retrieval and the ensemble (the stages ``tribunal calibrate`` calls) on one
    loopback server; return it (stop it when done) and the settings of a gateway that
    reaches them over gRPC with the server's per-start credential."""
    from tribunal.core import load_settings
    from tribunal.deploy import STAGES
    from tribunal.gateway._wiring import serve_stages

    transport, host = serve_stages(settings, ("retrieval", "ensemble"), name="lab")
    token = transport._token  # the loopback credential serve_stages made
    transport.close()
    address = f"127.0.0.1:{host.port}"
    served = load_settings(
        settings.profile,
        gateway={
            "discovery": "grpc",
            # Only retrieval and the matcher are called; the rest must be named.
            "addresses": dict.fromkeys(STAGES, address),
            "stage_token": token,
        },
    )
    return host, served
