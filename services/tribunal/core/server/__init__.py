"""The gRPC runtime shared by every service (this package may import grpc; domain code may not)."""

from ._auth import Caller, authorize, caller_of
from ._channel import RETRIED_READS, bearer_metadata, open_channel, retry_service_config
from ._credentials import (
    CredentialStore,
    Role,
    credential_from_entry,
    credentials_from,
    install_reload_signal,
    new_token,
    read_credentials_file,
    token_sha256,
)
from ._deadline_header import DEADLINE_METADATA, deadline_from_metadata
from ._exposure import check_exposure, is_loopback
from ._host import ServiceBinding, ServiceHost
from ._limits import RequestLimits
from ._metrics import METRICS, Metric
from ._status import status_for

__all__ = [
    "DEADLINE_METADATA",
    "METRICS",
    "RETRIED_READS",
    "Caller",
    "CredentialStore",
    "Metric",
    "RequestLimits",
    "Role",
    "ServiceBinding",
    "ServiceHost",
    "authorize",
    "bearer_metadata",
    "caller_of",
    "check_exposure",
    "credential_from_entry",
    "credentials_from",
    "deadline_from_metadata",
    "install_reload_signal",
    "is_loopback",
    "new_token",
    "open_channel",
    "read_credentials_file",
    "retry_service_config",
    "status_for",
    "token_sha256",
]
