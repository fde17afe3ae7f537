"""``tribunal ops status|scale``: observe and scale a running Tribunal.

On Kubernetes (default) they act on the KubeRay ``RayService`` (``--namespace``,
``--rayservice``; kubeconfig or in-cluster credentials). With ``--serve-address``
they act on a local Ray Serve through its REST API instead.

    tribunal ops status -n tribunal
    tribunal ops scale entailment --min 2 --max 8 -n tribunal --dry-run
    tribunal ops scale debate --replicas 0 --serve-address http://127.0.0.1:8265
"""

from __future__ import annotations

import argparse
import json
import os

__all__ = ["register"]

_SERVICES = ("gateway", "retrieval", "entailment", "ensemble", "debate", "confidence")


def _add_target(parser: argparse.ArgumentParser) -> None:
    kube = parser.add_argument_group("Kubernetes (KubeRay RayService)")
    kube.add_argument(
        "-n",
        "--namespace",
        default=os.environ.get("TRIBUNAL_K8S_NAMESPACE", "tribunal"),
        help="namespace of the RayService (default: $TRIBUNAL_K8S_NAMESPACE or tribunal)",
    )
    kube.add_argument(
        "--rayservice",
        default=os.environ.get("TRIBUNAL_RAYSERVICE", "tribunal"),
        help="RayService name (default: $TRIBUNAL_RAYSERVICE or tribunal, the chart's release)",
    )
    kube.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: KUBECONFIG)")
    kube.add_argument("--context", default=None, help="kubeconfig context")
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
    scale.add_argument("service", help=f"application name ({', '.join(_SERVICES)})")
    scale.add_argument("--min", dest="min_replicas", type=int, help="autoscaling min_replicas")
    scale.add_argument("--max", dest="max_replicas", type=int, help="autoscaling max_replicas")
    scale.add_argument("--replicas", type=int, help="a fixed replica count (turns autoscaling off)")
    scale.add_argument("--deployment", default=None, help="one deployment of the application")
    scale.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")
    _add_target(scale)
    scale.set_defaults(func=_scale)


def _status(args: argparse.Namespace) -> int:
    from ..ops import KubeRayClient, ServeRestClient, format_status, kube_status, serve_status

    if args.serve_address:
        result = serve_status(ServeRestClient(args.serve_address, token=args.token))
    else:
        client = KubeRayClient.connect(kubeconfig=args.kubeconfig, context=args.context)
        try:
            result = kube_status(client, args.namespace, args.rayservice)
        finally:
            client.close()
    print(json.dumps(result.to_json(), indent=2) if args.json else format_status(result))
    return 0


def _scale(args: argparse.Namespace) -> int:
    from ..ops import KubeRayClient, ScaleRequest, ServeRestClient, kube_scale, serve_scale

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
        client = KubeRayClient.connect(kubeconfig=args.kubeconfig, context=args.context)
        try:
            result = kube_scale(
                client, args.namespace, args.rayservice, request, dry_run=args.dry_run
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
    return 0
