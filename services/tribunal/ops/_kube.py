"""The Kubernetes side of `tribunal ops`: read a RayService, patch its ``serveConfigV2``.

Uses the official ``kubernetes`` client (kubeconfig, or the in-cluster service
account). Every call has a time limit (an API server that accepts the connection and
never answers fails the command instead of hanging it), and every patch names its
field manager, ``tribunal-ops``: the API server records it in ``managedFields``, so
``kubectl get -o yaml --show-managed-fields`` shows who changed ``serveConfigV2``, and
a server-side-apply ``helm upgrade`` reports a conflict naming it instead of silently
overwriting. Every failure becomes a Tribunal error that says what to check: no
cluster configured, API unreachable or silent, namespace or RayService missing (with
the RayServices that do exist), forbidden, or a concurrent change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "FIELD_MANAGER",
    "GROUP",
    "PLURAL",
    "VERSION",
    "KubeRayClient",
]

GROUP = "ray.io"
VERSION = "v1"
PLURAL = "rayservices"
FIELD_MANAGER = "tribunal-ops"
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# A pod's own namespace, when running in-cluster (the service account's mount).
_IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeRayClient:
    """RayService reads and serveConfigV2 patches through one ``ApiClient``."""

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        from kubernetes import client

        if request_timeout_s <= 0:
            raise InvalidArgumentError(
                f"the request timeout must be positive, got {request_timeout_s}",
                field="request_timeout",
            )
        self._api_client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self.host = str(api_client.configuration.host)
        self.namespace = namespace
        """The namespace of the kubeconfig context (or of the pod, in-cluster), if set."""
        self.request_timeout_s = request_timeout_s

    @classmethod
    def connect(
        cls,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> KubeRayClient:
        """From a kubeconfig (``--kubeconfig``/``KUBECONFIG``/``~/.kube/config``) or in-cluster.

        The client's :attr:`namespace` is the chosen context's namespace (as kubectl
        uses it), or in-cluster the pod's own.
        """
        from kubernetes import client, config
        from urllib3 import Retry

        configuration = client.Configuration()
        # Retry a refused connection, never a read that timed out: a silent API server
        # fails after one --request-timeout, and a PATCH is never sent twice.
        configuration.retries = Retry(total=2, connect=2, read=0, status=0, other=0)
        namespace: str | None = None
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            namespace = _context_namespace(config, kubeconfig, context)
        except (config.ConfigException, FileNotFoundError, TypeError) as kube_error:
            if kubeconfig is not None or context is not None:
                raise UnavailableError(
                    f"cannot use the kubeconfig{' ' + kubeconfig if kubeconfig else ''}"
                    f"{' context ' + context if context else ''}: {kube_error}"
                ) from kube_error
            try:
                config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            except config.ConfigException:
                raise UnavailableError(
                    "no Kubernetes cluster configured: no kubeconfig (KUBECONFIG, ~/.kube/config) "
                    "and not running in a pod; pass --kubeconfig/--context, or use "
                    "--serve-address for a local Ray Serve"
                ) from kube_error
            if _IN_CLUSTER_NAMESPACE.is_file():
                namespace = _IN_CLUSTER_NAMESPACE.read_text(encoding="utf-8").strip() or None
        return cls(
            client.ApiClient(configuration),
            namespace=namespace,
            request_timeout_s=request_timeout_s,
        )

    def _timeout(self) -> tuple[float, float]:
        """(connect, read) seconds: a silent API server fails the call instead of hanging it."""
        return (min(10.0, self.request_timeout_s), self.request_timeout_s)

    def _call(self, what: str, target: tuple[str, str | None], fn: Any, **kwargs: Any) -> Any:
        """``fn(**kwargs)`` with API errors turned into Tribunal errors about ``target``."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import (
            ConnectTimeoutError,
            HTTPError,
            MaxRetryError,
            ReadTimeoutError,
        )

        namespace, name = target
        try:
            return fn(**kwargs, _request_timeout=self._timeout())
        except ApiException as exc:
            if exc.status == 404:
                self._raise_not_found(namespace, name)
            if exc.status in (401, 403):
                raise FailedPreconditionError(
                    f"the Kubernetes API refused to {what} ({exc.status} {exc.reason}); "
                    f"check your RBAC rights on rayservices.ray.io in namespace {namespace!r}"
                ) from exc
            if exc.status == 409:
                raise FailedPreconditionError(
                    f"the RayService {namespace}/{name} changed while it was being scaled; "
                    "run the command again"
                ) from exc
            if exc.status == 422:
                raise InvalidArgumentError(
                    f"the Kubernetes API rejected the change: {exc.body}", field="serveConfigV2"
                ) from exc
            raise UnavailableError(
                f"the Kubernetes API at {self.host} failed to {what}: {exc.status} {exc.reason}"
            ) from exc
        except MaxRetryError as exc:
            if isinstance(exc.reason, ReadTimeoutError | ConnectTimeoutError):
                raise UnavailableError(
                    f"the Kubernetes API at {self.host} did not answer within "
                    f"{self.request_timeout_s:g} s while trying to {what}; check the cluster "
                    "(or raise --request-timeout)"
                ) from exc
            raise UnavailableError(
                f"cannot reach the Kubernetes API at {self.host}: {exc.reason}"
            ) from exc
        except (TimeoutError, ReadTimeoutError, ConnectTimeoutError) as exc:
            raise UnavailableError(
                f"the Kubernetes API at {self.host} did not answer within "
                f"{self.request_timeout_s:g} s while trying to {what}; check the cluster "
                "(or raise --request-timeout)"
            ) from exc
        except HTTPError as exc:
            raise UnavailableError(
                f"cannot reach the Kubernetes API at {self.host}: {exc}"
            ) from exc

    def _raise_not_found(self, namespace: str, name: str | None) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.read_namespace(namespace, _request_timeout=self._timeout())
        except ApiException as exc:
            if exc.status == 404:
                raise NotFoundError(f"namespace {namespace!r} does not exist") from None
        if name is None:
            raise NotFoundError(
                f"the RayService resource ({PLURAL}.{GROUP}/{VERSION}) is not served by this "
                "cluster; install the KubeRay operator first"
            )
        try:
            listed: Any = self._custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, _request_timeout=self._timeout()
            )
            names = sorted(item["metadata"]["name"] for item in listed.get("items", []))
        except ApiException:
            names = []
        raise NotFoundError(
            f"no RayService {name!r} in namespace {namespace!r}"
            + (f" (RayServices there: {', '.join(names)})" if names else " (it has none)")
        )

    def get_rayservice(self, namespace: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self._call(
            "read the RayService",
            (namespace, name),
            self._custom.get_namespaced_custom_object,
            group=GROUP,
            version=VERSION,
            namespace=namespace,
            plural=PLURAL,
            name=name,
        )
        return obj

    def patch_serve_config(
        self, namespace: str, name: str, serve_config: str, resource_version: str | None
    ) -> dict[str, Any]:
        """A JSON merge patch of ``spec.serveConfigV2`` alone, by field manager ``tribunal-ops``.

        ``metadata.resourceVersion`` makes the API server refuse the patch (409) if the
        RayService changed since it was read, so a concurrent edit is never lost.
        """
        body: dict[str, Any] = {"spec": {"serveConfigV2": serve_config}}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        obj: dict[str, Any] = self._call(
            "patch the RayService",
            (namespace, name),
            self._custom.patch_namespaced_custom_object,
            group=GROUP,
            version=VERSION,
            namespace=namespace,
            plural=PLURAL,
            name=name,
            body=body,
            field_manager=FIELD_MANAGER,
            _content_type="application/merge-patch+json",
        )
        return obj

    def close(self) -> None:
        self._api_client.close()


def _context_namespace(config: Any, kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the chosen kubeconfig context names, if any."""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, FileNotFoundError, TypeError):
        return None
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) or active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None
