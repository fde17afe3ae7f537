"""What a calibration is bound to: the KB collection's version, the matcher, the embedder.

A threshold certified on one KB's traffic says nothing about another KB, nor about
the same KB searched by another embedder or matched by another matcher: the
signals would mean something else. ``tribunal calibrate`` records a
:class:`CalibrationBinding` in the artifact, and the scorer refuses to use the
artifact where any bound version differs (FAILED_PRECONDITION naming the command
that recalibrates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..core import FailedPreconditionError

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["CalibrationBinding", "embedder_version", "recalibrate_command"]


def embedder_version(settings: Settings) -> str:
    """The retrieval embedder as ``<artifact id>@<12 hex of its pinned sha256>`` (or hub id)."""
    from ..core.models import get_artifact

    assert settings.roles is not None, "the profile defines no roles"
    spec = settings.model_spec(settings.roles.embedder)
    if spec.artifact is not None:
        return f"{spec.artifact}@{get_artifact(spec.artifact).sha256[:12]}"
    return str(spec.hf_id)


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
    """The retrieval embedder (:func:`embedder_version`)."""
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
        """Refuse to serve under another retrieval embedder.

        Raises:
            FailedPreconditionError: the embedder differs.
        """
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
        strict: bool = False,
    ) -> None:
        """Refuse a request whose KB or matcher is not the one calibrated, or a gateway
        scoring another number of candidates per query (empty / 0 = not reported, which
        ``strict`` refuses too: the gateway always knows them).

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
