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
        if strict and not collection_version:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} is certified for collection "
                f"{self.collection!r} at version {self.collection_version}; retrieval did not "
                "report the KB's content version, so the certification cannot be checked. "
                f"Upgrade retrieval, or recalibrate: {recalibrate_command(self.collection)}",
                field=f"{where}collection_version",
            )
        if collection_version and collection_version != self.collection_version:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} is certified for collection "
                f"{self.collection!r} at version {self.collection_version}; the request's KB "
                f"is at {collection_version} (entries changed, or another collection). "
                f"Recalibrate: {recalibrate_command(self.collection)}",
                field=f"{where}collection_version",
            )
        if matcher and matcher != self.matcher:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} is certified for matcher {self.matcher}; the "
                f"request's candidates were matched by {matcher}. Recalibrate: "
                f"{recalibrate_command(self.collection)}",
                field=f"{where}matcher_version",
            )
        self._check_retrieval_model(retrieval_model, artifact_version, where, strict=strict)
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

    def _check_retrieval_model(
        self, retrieval_model: str, artifact_version: str, where: str, *, strict: bool
    ) -> None:
        """Refuse candidates found by another model's vectors: their dense scores, and so
        which entries became candidates, are another model's."""
        if strict and not retrieval_model:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} is certified for retrieval model "
                f"{self.embedder}; retrieval did not report the model its dense search "
                "compared, so the certification cannot be checked. Upgrade retrieval, or "
                f"recalibrate: {recalibrate_command(self.collection)}",
                field=f"{where}retrieval_model",
            )
        if retrieval_model and retrieval_model != self.embedder:
            raise FailedPreconditionError(
                f"calibrator {artifact_version} is certified for retrieval model "
                f"{self.embedder}; the request's candidates were retrieved with "
                f"{retrieval_model}. Recalibrate: {recalibrate_command(self.collection)}",
                field=f"{where}retrieval_model",
            )
