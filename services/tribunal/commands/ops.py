"""``tribunal ops status|scale``: observe and scale a running Tribunal.

On Kubernetes (default) they act on the KubeRay ``RayService`` (``--namespace``,
``--rayservice``; kubeconfig or in-cluster credentials). With ``--serve-address``
they act on a local Ray Serve through its REST API instead.

The namespace is, in order: ``--namespace``, ``$TRIBUNAL_K8S_NAMESPACE``, the
kubeconfig context's namespace (in a pod: its own), ``default`` (as kubectl).

    tribunal ops status -n tribunal
    tribunal ops scale entailment --min 2 --max 8 -n tribunal --dry-run
    tribunal ops scale debate --replicas 0 --serve-address http://127.0.0.1:8265
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ops import KubeRayClient, ScaleResult

from ..deploy import SERVICES

__all__ = ["register"]


def _add_target(parser: argparse.ArgumentParser) -> None:
    kube = parser.add_argument_group("Kubernetes (KubeRay RayService)")
    kube.add_argument(
        "-n",
        "--namespace",
        default=os.environ.get("TRIBUNAL_K8S_NAMESPACE"),
        help="namespace of the RayService (default: $TRIBUNAL_K8S_NAMESPACE, else the "
        "kubeconfig context's namespace, else default)",
    )
    kube.add_argument(
        "--rayservice",
        default=os.environ.get("TRIBUNAL_RAYSERVICE", "tribunal"),
        help="RayService name (default: $TRIBUNAL_RAYSERVICE or tribunal, the chart's release)",
    )
    kube.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: KUBECONFIG)")
    kube.add_argument("--context", default=None, help="kubeconfig context")
    kube.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up on an API server that does not answer within this (default: 30)",
    )
    local = parser.add_argument_group("local Ray Serve (REST API)")
    local.add_argument(
        "--serve-address",
        default=None,
        help="Ray dashboard URL, e.g. http://127.0.0.1:8265: act on a local Serve instead",
    )
    local.add_argument("--token", default=None, help="Ray auth token (default: RAY_AUTH_TOKEN)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("ops", help="status and scaling of a running deployment")
    verbs = parser.add_subparsers(dest="ops_command", required=True, metavar="VERB")

    status = verbs.add_parser("status", help="RayService (or Serve) and per-application replicas")
    _add_target(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(func=_status)

    scale = verbs.add_parser(
        "scale", help="change one service's replicas (autoscaling range or a fixed count)"
    )
    scale.add_argument("service", help=f"application name ({', '.join(SERVICES)})")
    scale.add_argument("--min", dest="min_replicas", type=int, help="autoscaling min_replicas")
    scale.add_argument("--max", dest="max_replicas", type=int, help="autoscaling max_replicas")
    scale.add_argument("--replicas", type=int, help="a fixed replica count (turns autoscaling off)")
    scale.add_argument("--deployment", default=None, help="one deployment of the application")
    scale.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")
    _add_target(scale)
    scale.set_defaults(func=_scale)


def _status(args: argparse.Namespace) -> int:
    from ..ops import ServeRestClient, format_status, kube_status, serve_status

    if args.serve_address:
        result = serve_status(ServeRestClient(args.serve_address, token=args.token))
    else:
        client = _connect(args)
        try:
            result = kube_status(client, _namespace(args, client), args.rayservice)
        finally:
            client.close()
    print(json.dumps(result.to_json(), indent=2) if args.json else format_status(result))
    return 0


def _scale(args: argparse.Namespace) -> int:
    from ..ops import ScaleRequest, ServeRestClient, kube_scale, serve_scale

    request = ScaleRequest(
        application=args.service,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        replicas=args.replicas,
        deployment=args.deployment,
    )
    request.validate()
    if args.serve_address:
        result = serve_scale(
            ServeRestClient(args.serve_address, token=args.token), request, dry_run=args.dry_run
        )
    else:
        client = _connect(args)
        try:
            result = kube_scale(
                client, _namespace(args, client), args.rayservice, request, dry_run=args.dry_run
            )
        finally:
            client.close()
    if not result.diff:
        print(f"{result.target}: {args.service} already has these replica settings; nothing to do")
        return 0
    print(result.diff, end="")
    if result.applied:
        print(f"applied to {result.target}: only {args.service}'s replica settings changed")
    else:
        print(f"dry run: {result.target} not changed")
    _print_values_change(result)
    return 0


def _connect(args: argparse.Namespace) -> KubeRayClient:
    from ..ops import KubeRayClient

    return KubeRayClient.connect(
        kubeconfig=args.kubeconfig, context=args.context, request_timeout_s=args.request_timeout
    )


def _namespace(args: argparse.Namespace, client: KubeRayClient) -> str:
    return str(args.namespace or client.namespace or "default")


def _print_values_change(result: ScaleResult) -> None:
    """How to make the change outlive the next ``helm upgrade``."""
    if not result.values_change:
        return
    sets = " ".join(f"--set {value}" for value in result.values_change)
    if result.helm_release:
        namespace = result.target.split(" ", 1)[1].split("/", 1)[0]
        print(
            "helm upgrade renders serveConfigV2 from the chart's values again: put the same "
            "change in them, or the next upgrade that changes the Serve config undoes it:\n"
            f"  helm upgrade {result.helm_release} charts/tribunal -n {namespace} "
            f"--reuse-values {sets}"
        )
    else:
        print(
            "the values that render the same replica settings (for the chart, or the "
            f"manifests you apply): {sets}"
        )
