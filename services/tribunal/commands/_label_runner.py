"""Running a label job's pending items: on Ray, through a running gateway, or with the
models loaded in this process (``tribunal label run`` and ``tribunal label evaluate``)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..core import FailedPreconditionError, Settings

__all__ = ["run_label_job"]


def run_label_job(args: argparse.Namespace, settings: Settings, store: Any, mode: str) -> Any:
    """Label the pending items of ``args.job`` in ``mode``: on Ray (``--ray``), through a
    running gateway (``--gateway``) or with the models loaded here; returns the run's
    report. A finished job loads no models."""
    from ..jobs import GatewayLabeller, Labeller, PipelineLabeller, run_job
    from ..jobs._labeller import shares_passes

    if args.batch_size is None:
        # Judge-only labelling (judge mode, a plan's cascade with its band to humans)
        # shares forward passes across a batch; a debate labels item by item.
        args.batch_size = 64 if shares_passes(mode, settings.gateway.label_band_to) else 4

    if args.ray:
        from ..jobs import run_on_ray

        return run_on_ray(
            store,
            args.job,
            settings,
            mode=mode,
            workers=args.workers,
            batch_size=args.batch_size,
            progress=not args.no_progress,
            address=args.ray_address,
            lease_s=args.lease_seconds,
        )
    started = time.perf_counter()
    labeller: Labeller
    if args.gateway:
        labeller = GatewayLabeller(
            args.gateway,
            mode,
            token=args.token,
            tls_ca=args.tls_ca,
            server_name=args.tls_server_name,
        )
    elif store.counts(args.job).pending:
        print("loading the models ...", flush=True)
        labeller = PipelineLabeller(settings, mode)
    else:
        labeller = _Nothing()
    loaded = time.perf_counter() - started
    try:
        return run_job(
            store,
            args.job,
            labeller,
            mode=mode,
            workers=args.workers or 1,
            batch_size=args.batch_size,
            progress=not args.no_progress,
            load_seconds=loaded,
            lease_s=args.lease_seconds,
        )
    finally:
        labeller.close()


class _Nothing:
    """A job with nothing pending loads no models."""

    def label(self, items: Any) -> list[Any]:
        raise FailedPreconditionError("no item should reach a finished job's labeller")

    def close(self) -> None:
        return None
