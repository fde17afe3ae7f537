"""What a calibration is bound to: the KB collection's version, the matcher, the
retrieval model.

A threshold certified on one KB's traffic says nothing about another KB, nor about
the same KB searched with another model's vectors or matched by another matcher: the
signals would mean something else. ``tribunal calibrate`` records a
:class:`CalibrationBinding` in the artifact, and the scorer refuses to use the
artifact where any bound version differs (FAILED_PRECONDITION naming the command
that recalibrates).

The retrieval model is the collection's: the profile's embedder
(:func:`embedder_version`), or ``tuned:<tm-version>`` for a collection re-embedded with
its tuned matcher's model. Retrieval reports it with every search, so it is checked per
request, like the KB and matcher versions; a binding to a profile embedder is checked
against the profile when the artifact loads as well, so a profile that changed its
embedder fails at startup rather than on every request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..core import TUNED_MODEL_PREFIX, FailedPreconditionError, embedder_version

if TYPE_CHECKING:
    pass

__all__ = ["CalibrationBinding", "embedder_version", "recalibrate_command"]


def recalibrate_command(collection: str) -> str:
    """The command that makes a new, matching artifact."""
    return f"`tribunal calibrate --collection {collection} --traffic LABELLED.jsonl`"


@dataclass(frozen=True)
class CalibrationBinding:
    """The versions a calibration was measured under."""

    collection: str
    """Collection name at calibration time (for messages)."""
    collection_version: str
    """Content hash of the collection's entries, as retrieval reports it
    (``SearchResponse.kb_content_version``)."""
    entries: int
    """Entries in the collection."""
    matcher: str
    """``<aggregator>:<artifact version>`` as the ensemble stage reported it."""
    embedder: str
    """The retrieval model the collection's dense search compared, as retrieval reports it
    (``SearchResponse.retrieval_model``): a profile embedder (:func:`embedder_version`) or
    ``tuned:<tm-version>``."""
    profile: str
    """The settings profile the stages ran with."""
    candidates: int
    """Candidates the gateway scores per query (``gateway.candidates``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationBinding:
        return cls(**data)

    def check_serving(self, *, embedder: str, artifact_version: str) -> None:
        """Refuse to serve under another retrieval embedder than the profile's ``embedder``,
        when the binding is to a profile embedder (a tuned model is checked per request).

        Raises:
            FailedPreconditionError: the embedder differs.
        """
        if self.embedder.startswith(TUNED_MODEL_PREFIX):  # not a profile's: per request
            return
        if embedder != self.embedder:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} was calibrated with retrieval embedder "
                f"{self.embedder}; this profile's is {embedder}. Recalibrate: "
                f"{recalibrate_command(self.collection)}",
                field="confidence.artifact_path",
            )

    def check_request(
        self,
        *,
        collection_version: str,
        matcher: str,
        artifact_version: str,
        where: str,
        candidates: int = 0,
        retrieval_model: str = "",
        strict: bool = False,
    ) -> None:
        """Refuse a request whose KB, matcher or retrieval model is not the one calibrated,
        or a gateway scoring another number of candidates per query (empty / 0 = not
        reported; ``strict`` refuses an unreported KB version or retrieval model too:
        retrieval reports both with every search).

        Raises:
            FailedPreconditionError: a version differs; the message names the command.
        """
        self._compare(
            collection_version,
            self.collection_version,
            artifact_version,
            strict=strict,
            field=f"{where}collection_version",
            certified=f"collection {self.collection!r} at version {self.collection_version}",
            unreported="retrieval did not report the KB's content version",
            other=f"the request's KB is at {collection_version} (entries changed, or "
            "another collection)",
        )
        self._compare(
            matcher,
            self.matcher,
            artifact_version,
            strict=False,
            field=f"{where}matcher_version",
            certified=f"matcher {self.matcher}",
            unreported="",
            other=f"the request's candidates were matched by {matcher}",
        )
        # Candidates found by another model's vectors: their dense scores, and so which
        # entries became candidates, are another model's.
        self._compare(
            retrieval_model,
            self.embedder,
            artifact_version,
            strict=strict,
            field=f"{where}retrieval_model",
            certified=f"retrieval model {self.embedder}",
            unreported="retrieval did not report the model its dense search compared",
            other=f"the request's candidates were retrieved with {retrieval_model}",
        )
        if candidates and candidates != self.candidates:
            # The certified decision is the best of this many candidates: another count is
            # another procedure, with another hallucination rate.
            raise FailedPreconditionError(
                f"calibrator {artifact_version} was certified for a gateway scoring "
                f"{self.candidates} candidate(s) per query; this one scores {candidates} "
                f"(gateway.candidates). Set it back, or recalibrate: "
                f"{recalibrate_command(self.collection)}",
                field="gateway.candidates",
            )

    def _compare(
        self,
        reported: str,
        bound: str,
        artifact_version: str,
        *,
        strict: bool,
        field: str,
        certified: str,
        unreported: str,
        other: str,
    ) -> None:
        """Refuse a reported version other than the bound one (``strict``: an unreported
        one too, whose certification cannot be checked)."""
        if strict and not reported:
            problem = (
                f"{unreported}, so the certification cannot be checked. Upgrade retrieval, "
                "or recalibrate"
            )
        elif reported and reported != bound:
            problem = f"{other}. Recalibrate"
        else:
            return
        raise FailedPreconditionError(
            f"calibrator {artifact_version} is certified for {certified}; {problem}: "
            f"{recalibrate_command(self.collection)}",
            field=field,
        )
