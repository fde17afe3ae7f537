"""The Kubernetes side of `tribunal ops`: read a RayService, patch its ``serveConfigV2``.

Uses the official ``kubernetes`` client (kubeconfig, or the in-cluster service
account). Every failure becomes a Tribunal error that says what to check: no
cluster configured, API unreachable, namespace or RayService missing (with the
RayServices that do exist), forbidden, or a concurrent change.
"""

from __future__ import annotations

from typing import Any

from ..core import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)

__all__ = ["GROUP", "PLURAL", "VERSION", "KubeRayClient"]

GROUP = "ray.io"
VERSION = "v1"
PLURAL = "rayservices"


class KubeRayClient:
    """RayService reads and serveConfigV2 patches through one ``ApiClient``."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._api_client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self.host = str(api_client.configuration.host)

    @classmethod
    def connect(cls, *, kubeconfig: str | None = None, context: str | None = None) -> KubeRayClient:
        """From a kubeconfig (``--kubeconfig``/``KUBECONFIG``/``~/.kube/config``) or in-cluster."""
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
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
        return cls(client.ApiClient(configuration))

    def _call(self, what: str, target: tuple[str, str | None], fn: Any, **kwargs: Any) -> Any:
        """``fn(**kwargs)`` with API errors turned into Tribunal errors about ``target``."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        namespace, name = target
        try:
            return fn(**kwargs)
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
        except HTTPError as exc:
            raise UnavailableError(
                f"cannot reach the Kubernetes API at {self.host}: {exc}"
            ) from exc

    def _raise_not_found(self, namespace: str, name: str | None) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.read_namespace(namespace)
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
                GROUP, VERSION, namespace, PLURAL
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

    def list_rayservices(self, namespace: str) -> list[dict[str, Any]]:
        listed: dict[str, Any] = self._call(
            "list RayServices",
            (namespace, None),
            self._custom.list_namespaced_custom_object,
            group=GROUP,
            version=VERSION,
            namespace=namespace,
            plural=PLURAL,
        )
        items: list[dict[str, Any]] = listed.get("items", [])
        return items

    def patch_serve_config(
        self, namespace: str, name: str, serve_config: str, resource_version: str | None
    ) -> dict[str, Any]:
        """A JSON merge patch of ``spec.serveConfigV2`` alone.

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
        )
        return obj

    def close(self) -> None:
        self._api_client.close()
