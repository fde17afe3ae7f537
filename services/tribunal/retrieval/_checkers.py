"""Where the retrieval service gets its entailment checker (``retrieval.verifier``).

- ``local``: the entailment cascade in this process (the profile's checker models
  through the shared engine cache, so an in-process stack loads each model once),
  built at the first verification: a search-only replica never loads it.
- ``service``: the entailment service at ``retrieval.verifier_address`` (``Check``).
- ``none``: no checker; entries with supporting documents are stored UNVERIFIED until
  ``tribunal kb verify`` checks them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..core import ConfigError
from ..entailment import checker_version
from ._verdict_cache import SqliteVerdictCache
from ._verification import ClaimCheck, EntailmentChecker

if TYPE_CHECKING:
    from ..core import Settings
    from ..entailment import EntailmentCascade

__all__ = ["CascadeChecker", "LazyChecker", "profile_checker", "profile_verdict_cache"]


class CascadeChecker:
    """The entailment domain object behind :class:`EntailmentChecker`.

    Args:
        cascade: The profile's cascade (quote check unused: claims carry no quote).
        version: :func:`checker_version` of the settings it was built from.
    """

    def __init__(self, cascade: EntailmentCascade, version: str) -> None:
        self.cascade = cascade
        self.version = version
        strong = cascade.strong.model_id if cascade.strong is not None else None
        self.models = tuple(m for m in (cascade.fast.model_id, strong) if m)
        self.max_hypothesis_chars = cascade.max_hypothesis_chars
        self.max_pairs = cascade.max_pairs_per_request
        self._lock = threading.Lock()

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[ClaimCheck]:
        from ..entailment import PairToCheck

        with self._lock:  # one batch at a time, as the entailment service runs it
            verdicts = self.cascade.check([PairToCheck(p, h) for p, h in pairs])
        return [ClaimCheck(v.p_entail, v.label.value) for v in verdicts]


class LazyChecker:
    """A checker built at its first use; its version is known before (from settings)."""

    def __init__(
        self,
        build: Callable[[], EntailmentChecker],
        *,
        version: str,
        models: tuple[str, ...],
        max_hypothesis_chars: int,
        max_pairs: int,
    ) -> None:
        self._build = build
        self._checker: EntailmentChecker | None = None
        self._lock = threading.Lock()
        self.version = version
        self.models = models
        self.max_hypothesis_chars = max_hypothesis_chars
        self.max_pairs = max_pairs

    def get(self) -> EntailmentChecker:
        with self._lock:
            if self._checker is None:
                self._checker = self._build()
            return self._checker

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[ClaimCheck]:
        return self.get().check(pairs)


def _models(settings: Settings) -> tuple[str, ...]:
    options = settings.entailment
    if settings.roles is None:
        return ()
    roles = [] if options.fast_backend == "lexical" else ["entailment_fast"]
    if options.two_stage:
        roles.append("entailment_strong")
    names = []
    for role in roles:
        spec = settings.model_spec(getattr(settings.roles, role))
        names.append(spec.artifact or spec.hf_id or getattr(settings.roles, role))
    if options.fast_backend == "lexical":
        names.insert(0, "lexical-overlap")
    return tuple(names)


def profile_checker(settings: Settings) -> EntailmentChecker | None:
    """The checker ``retrieval.verifier`` names (not loaded yet), or None for ``none``."""
    kind = settings.retrieval.verifier
    if kind == "none":
        return None
    version = checker_version(settings)
    options = settings.entailment
    if kind == "service":
        address = settings.retrieval.verifier_address
        if not address:
            raise ConfigError(
                "retrieval.verifier is 'service' but retrieval.verifier_address is empty: "
                "set it to the entailment service's host:port",
                field="retrieval.verifier_address",
            )
        from ._entailment_client import EntailmentServiceChecker

        token = settings.server.auth_token
        return EntailmentServiceChecker(
            address,
            version=version,
            models=_models(settings),
            max_hypothesis_chars=options.max_hypothesis_chars,
            max_pairs=options.max_pairs_per_request,
            token=token.get_secret_value() if token is not None else None,
            max_message_bytes=settings.server.max_message_bytes,
        )

    def build() -> EntailmentChecker:
        from ..entailment import build_cascade

        return CascadeChecker(build_cascade(settings), version)

    return LazyChecker(
        build,
        version=version,
        models=_models(settings),
        max_hypothesis_chars=options.max_hypothesis_chars,
        max_pairs=options.max_pairs_per_request,
    )


def profile_verdict_cache(settings: Settings) -> SqliteVerdictCache:
    """``retrieval.verdict_cache``, default ``data_dir/retrieval/verdict-cache.sqlite3``."""
    path = settings.retrieval.verdict_cache or (
        settings.data_dir / "retrieval" / "verdict-cache.sqlite3"
    )
    return SqliteVerdictCache(path.expanduser())
