"""What the ``tribunal label`` subcommands share: settings for a job, the job store, the
input spec from the command line, the relevance artifact a job is judged with."""

from __future__ import annotations

import argparse
from typing import Any

from ..core import InvalidArgumentError, Settings, load_settings

__all__ = ["input_spec", "job_store", "label_settings", "parse_fields", "relevance_version"]


def label_settings(args: argparse.Namespace) -> Settings:
    """The profile's settings with the command line's database; a ``run`` waits for the
    models as long as they take."""
    base = load_settings(args.profile)
    overrides: dict[str, Any] = {}
    if args.database_url:
        overrides["database_url"] = args.database_url
    if getattr(args, "label_command", "") == "run":
        # A job waits for the models however slow the machine is: a labelling item is
        # never given up on because a CPU took minutes (the gateway's caps are for users).
        overrides["gateway"] = {
            **base.gateway.model_dump(),
            "deadline_s": 3600.0,
            "stage_timeout_s": dict.fromkeys(base.gateway.stage_timeout_s, 3600.0),
        }
        overrides["server"] = {**base.server.model_dump(), "port": 0, "metrics_port": None}
    return load_settings(args.profile, **overrides) if overrides else base


def job_store(settings: Settings) -> Any:
    """The job store of ``settings.database_url``."""
    from ..jobs import JobStore

    return JobStore.from_url(settings.database_url)


def parse_fields(pairs: list[str]) -> dict[str, str]:
    """``--field FIELD=KEY`` pairs as a mapping."""
    fields = {}
    for pair in pairs:
        name, eq, key = pair.partition("=")
        if not eq or not name or not key:
            raise InvalidArgumentError(f"--field {pair!r} must be FIELD=KEY", field="field")
        fields[name] = key
    return fields


def input_spec(args: argparse.Namespace) -> Any:
    """The items the command line names (``--input`` and its format options)."""
    from ..jobs import InputSpec, detect_format

    if args.input is None:
        raise InvalidArgumentError(
            "give --input: the items (JSONL, BEIR folder or TREC run)", field="input"
        )
    return InputSpec(
        path=args.input,
        format=args.format or detect_format(args.input),
        run=args.run,
        qrels=args.qrels,
        corpus=args.corpus,
        depth=args.depth,
        split=args.split,
        fields=parse_fields(args.field),
    )


def relevance_version(settings: Settings) -> dict[str, Any] | None:
    """Which relevance artifact judges and routes this job (None: none found)."""
    from ..ensemble import RelevanceArtifact, relevance_artifact_path

    path = relevance_artifact_path(settings)
    if not path.is_file():
        return None
    artifact = RelevanceArtifact.load(path)
    return {"path": str(path), "version": artifact.version}
