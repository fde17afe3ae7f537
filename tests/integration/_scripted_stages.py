"""Scripted stage servicers on a real gRPC server: fault injection for the gateway.

Each stage answers from a script (what the real services would answer for a
known KB) unless told to misbehave: ``unavailable:N`` (fail N calls with
UNAVAILABLE, then answer), ``slow:S`` (sleep S seconds first), ``malformed``
(a probability outside [0, 1] or a wrong result count), ``error`` (INTERNAL).
They are test doubles for fault paths the real models cannot be made to hit
on demand; the end-to-end tests run the real services.

Retrieval answers as the real service would for the KB: RRF scores of its ranks,
each entry's stored verification (VERIFIED by the tiny profile's checker when it
has chunks, SELF_EVIDENCED when not; ``Script.verdicts`` overrides). Confidence is
the real confidence servicer on an identity calibrator (confidence = P(match),
plain threshold 0.5), which the gateway under test must trust:
``load_settings(..., confidence=script.confidence_settings)``. Retrieval signs what it
serves, as the KB's writer would, with the script's key, which the gateway must trust:
``gateway={..., "kb_trusted_keys": script.trusted_keys}``.
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from tribunal.confidence import CalibratorArtifact, ConfidenceScorer, embedder_version
from tribunal.confidence._calibrators import TemperatureCalibrator
from tribunal.confidence._features import FeatureSpace
from tribunal.confidence.servicer import ConfidenceServicer
from tribunal.core import ServerSettings, load_settings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.entailment import checker_version
from tribunal.kb import answer_sha256, entry_from_proto, entry_sha256
from tribunal.retrieval import (
    KbSigner,
    VerificationVerdict,
    canonical_record,
    entry_record,
    head_record,
)
from tribunal.retrieval._verification import EntryVerification
from tribunal.v1 import (
    common_pb2,
    confidence_pb2,
    confidence_pb2_grpc,
    debate_pb2,
    debate_pb2_grpc,
    ensemble_pb2,
    ensemble_pb2_grpc,
    entailment_pb2,
    entailment_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
)

KB = [
    common_pb2.KbEntry(
        id="faq-1",
        question="How long is the incubation period?",
        answer="The incubation period is 2 to 14 days.",
        chunks=[common_pb2.Chunk(id="c1", text="Symptoms appear 2 to 14 days after exposure.")],
    ),
    common_pb2.KbEntry(id="faq-2", question="Can pets spread it?", answer="Rarely."),
]


CHECKER_VERSION = checker_version(load_settings("tiny"))
"""The entailment checker version a gateway on the tiny profile expects."""
RETRIEVAL_MODEL = embedder_version(load_settings("tiny"))
"""The model the tiny profile's retrieval reports its dense search compared."""
PLAIN_THRESHOLD = 0.5


def identity_calibrator(path: Path, note: str = "") -> Path:
    """A temperature calibrator with T = 1 on P(match): confidence = P(match). ``note``
    goes into its config: another note, another artifact version."""
    calibrator = TemperatureCalibrator(score="ensemble_p_match")
    calibrator.space_ = FeatureSpace(("ensemble_p_match",), (0.5,), ("strong",), ())
    calibrator.temperature_ = 1.0
    artifact = CalibratorArtifact(
        calibrator=calibrator,
        thresholds=(),
        config={"calibrator": "temperature", "fitted": "by hand: T = 1"}
        | ({"note": note} if note else {}),
        training_data={"source": "none", "rows": 0},
    )
    return artifact.save(path)


def verification(
    entry: common_pb2.KbEntry, verdict: int | None = None
) -> retrieval_pb2.EntryVerification:
    """The verification the real retrieval service stores for ``entry``."""
    if verdict is None:
        verdict = (
            retrieval_pb2.VERIFICATION_VERDICT_VERIFIED
            if entry.chunks
            else retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED
        )
    verified = verdict == retrieval_pb2.VERIFICATION_VERDICT_VERIFIED
    return retrieval_pb2.EntryVerification(
        verdict=verdict,  # type: ignore[arg-type]
        reason="" if verified else "scripted",
        entailed_chunk_ids=[c.id for c in entry.chunks] if verified else [],
        chunk_p_entail={c.id: 0.9 for c in entry.chunks} if verified else {},
        checker_version=CHECKER_VERSION if entry.chunks else "",
        answer_sha256=answer_sha256(entry.answer),
        entry_sha256=entry_sha256(entry_from_proto(entry)),
        verified_at="2026-12-01T00:00:00+00:00",
        claims=1,
    )


_STORED = {
    retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED: VerificationVerdict.UNVERIFIED,
    retrieval_pb2.VERIFICATION_VERDICT_VERIFIED: VerificationVerdict.VERIFIED,
    retrieval_pb2.VERIFICATION_VERDICT_FAILED: VerificationVerdict.FAILED,
    retrieval_pb2.VERIFICATION_VERDICT_NO_EVIDENCE: VerificationVerdict.NO_EVIDENCE,
    retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED: VerificationVerdict.NO_EVIDENCE,
}


def signed_record(
    signer: KbSigner,
    collection: str,
    entry: common_pb2.KbEntry,
    verification: retrieval_pb2.EntryVerification,
    version: int,
) -> retrieval_pb2.SignedRecord:
    """The served record the KB's writer signs for ``entry`` as stored."""
    stored = EntryVerification(
        verdict=_STORED[verification.verdict],
        entailed_chunk_ids=tuple(verification.entailed_chunk_ids),
        chunk_p_entail=dict(verification.chunk_p_entail),
        checker_version=verification.checker_version,
        models=tuple(verification.models),
        answer_sha256=verification.answer_sha256,
        entry_sha256=verification.entry_sha256,
        verified_at=verification.verified_at,
        claims=verification.claims,
    )
    record = canonical_record(entry_record(collection, entry_from_proto(entry), stored, version))
    signed = signer.sign(record)
    return retrieval_pb2.SignedRecord(
        record=signed.record, key_id=signed.key_id, signature=signed.signature
    )


@dataclass
class Script:
    """What each stage does; tests mutate it between calls."""

    behaviour: dict[str, str] = field(default_factory=dict)
    p_match: float = 0.9
    """The ensemble's P(match), and the relevance judge's P(relevant)."""
    relevance_threshold: float = 0.5
    relevance_band: tuple[float, float] = (0.2, 0.8)
    hits: list[common_pb2.KbEntry] = field(default_factory=lambda: list(KB))
    debate_outcome: int = debate_pb2.DEBATE_OUTCOME_AGREED
    verdicts: dict[str, int] = field(default_factory=dict)
    """Verification verdict by entry id (default: what the real service would store)."""
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    calibrator: Path = field(
        default_factory=lambda: identity_calibrator(
            Path(tempfile.mkdtemp(prefix="scripted-")) / "identity-calibrator.json"
        )
    )
    kb_content_version: str = "kb-scripted000000"
    """The content version retrieval reports (and signs)."""
    retrieval_model: str = RETRIEVAL_MODEL
    """The model retrieval reports its dense search compared ("": not reported)."""
    score_requests: list[confidence_pb2.ScoreRequest] = field(default_factory=list)
    """Every item the confidence stage was asked to score, in arrival order."""
    signer: KbSigner = field(default_factory=KbSigner.generate)
    """The KB writer's key the scripted retrieval signs with."""

    @property
    def trusted_keys(self) -> str:
        """A folder holding the signer's public key (``gateway.kb_trusted_keys``)."""
        folder = Path(tempfile.mkdtemp(prefix="scripted-keys-"))
        (folder / f"{self.signer.key_id}.pub").write_bytes(self.signer.public_pem())
        return str(folder)

    @property
    def confidence_settings(self) -> dict[str, object]:
        """What the gateway under test must trust: the scripted confidence's calibrator."""
        return {"artifact_path": str(self.calibrator), "plain_threshold": PLAIN_THRESHOLD}

    def enter(self, stage: str, context: grpc.ServicerContext) -> str:
        """Count the call and apply ``unavailable``/``slow``/``error``; returns the mode."""
        with self.lock:
            self.calls[stage] = self.calls.get(stage, 0) + 1
            mode = self.behaviour.get(stage, "ok")
            if mode.startswith("unavailable:"):
                left = int(mode.split(":")[1])
                if left > 0:
                    self.behaviour[stage] = f"unavailable:{left - 1}"
                    context.abort(grpc.StatusCode.UNAVAILABLE, f"{stage} is restarting")
                mode = "ok"
        if mode.startswith("slow:"):
            time.sleep(float(mode.split(":")[1]))
        if mode == "error":
            context.abort(grpc.StatusCode.INTERNAL, f"{stage} crashed")
        if mode == "not_found":
            context.abort(grpc.StatusCode.NOT_FOUND, "collection 'nope' does not exist")
        return mode


class _Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def Search(self, request, context):  # type: ignore[no-untyped-def]
        mode = self.script.enter("retrieval", context)
        hits = [
            retrieval_pb2.SearchHit(
                entry=entry,
                score=2.0 / (60 + i + 1),  # RRF (k = 60) of rank i + 1 in both lists
                rank=i + 1,
                dense_score=0.8 - 0.1 * i,
                dense_rank=i + 1,
                sparse_score=5.0 - i,
                sparse_rank=i + 1,
                verification=verification(entry, self.script.verdicts.get(entry.id)),
            )
            for i, entry in enumerate(self.script.hits[: request.top_k])
        ]
        version, content = 7, self.script.kb_content_version
        for hit in hits:
            hit.served.CopyFrom(
                signed_record(
                    self.script.signer, request.collection, hit.entry, hit.verification, version
                )
            )
        policy = not any(
            hit.verification.verdict == retrieval_pb2.VERIFICATION_VERDICT_NO_EVIDENCE
            for hit in hits
        )
        head = self.script.signer.sign(
            canonical_record(head_record(request.collection, version, content, policy))
        )
        if mode == "malformed" and hits:
            hits[0].rank = 0
        return retrieval_pb2.SearchResponse(
            hits=hits,
            request_id=request.request_id,
            kb_version=version,
            kb_content_version=content,
            retrieval_model=self.script.retrieval_model,
            kb_head=retrieval_pb2.SignedRecord(
                record=head.record, key_id=head.key_id, signature=head.signature
            ),
        )


class _Ensemble(ensemble_pb2_grpc.EnsembleServiceServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def _one(self, request: ensemble_pb2.MatchRequest, mode: str) -> ensemble_pb2.MatchResponse:
        p = 1.7 if mode == "malformed" else self.script.p_match
        return ensemble_pb2.MatchResponse(
            item_id=request.item_id,
            threshold=0.5,
            p_match=p,
            match=p >= 0.5,
            judges=[ensemble_pb2.JudgeVerdict(judge="strong", model="m", prompt="p", p_yes=0.8)],
            aggregator="latent",
            artifact_version="test-1",
        )

    def Match(self, request, context):  # type: ignore[no-untyped-def]
        return self._one(request, self.script.enter("ensemble", context))

    def BatchMatch(self, request, context):  # type: ignore[no-untyped-def]
        mode = self.script.enter("ensemble", context)
        return ensemble_pb2.BatchMatchResponse(
            results=[self._one(r, mode) for r in request.items], request_id=request.request_id
        )

    def JudgeRelevance(self, request, context):  # type: ignore[no-untyped-def]
        mode = self.script.enter("ensemble", context)
        low, high = self.script.relevance_band
        return ensemble_pb2.JudgeRelevanceResponse(
            p_relevant=1.7 if mode == "malformed" else self.script.p_match,
            relevant=self.script.p_match >= self.script.relevance_threshold,
            threshold=self.script.relevance_threshold,
            band_low=low,
            band_high=high,
            features=[ensemble_pb2.RelevanceFeatureValue(name="llm_strong/yesno", value=0.8)],
            usage=common_pb2.TokenUsage(prompt_tokens=50),
            artifact_version="rel-test-1",
            item_id=request.item_id,
        )


class _Entailment(entailment_pb2_grpc.EntailmentServiceServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def Check(self, request, context):  # type: ignore[no-untyped-def]
        mode = self.script.enter("entailment", context)
        results = [
            entailment_pb2.EntailmentResult(
                p_entail=0.9, label=entailment_pb2.ENTAILMENT_LABEL_ENTAILED, model="nli"
            )
            for _ in request.pairs
        ]
        if mode == "malformed":
            results = results[:-1]
        return entailment_pb2.CheckResponse(results=results)


class _Confidence(confidence_pb2_grpc.ConfidenceServiceServicer):
    """The real confidence servicer on the identity calibrator: confidence = P(match),
    ACCEPT at >= 0.5."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.servicer = ConfidenceServicer(1000)
        self.servicer.scorer = ConfidenceScorer(
            CalibratorArtifact.load(script.calibrator),
            alpha=0.05,
            plain_threshold=PLAIN_THRESHOLD,
        )

    def BatchScore(self, request, context):  # type: ignore[no-untyped-def]
        mode = self.script.enter("confidence", context)
        with self.script.lock:
            self.script.score_requests.extend(request.items)
        response = self.servicer.BatchScore(request, context)
        if mode == "malformed":
            for result in response.results:
                result.confidence = float("nan")
        return response


class _Debate(debate_pb2_grpc.DebateServiceServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def Assess(self, request, context):  # type: ignore[no-untyped-def]
        self.script.enter("debate", context)
        outcome = self.script.debate_outcome
        label = (
            common_pb2.LABEL_RELEVANT
            if outcome == debate_pb2.DEBATE_OUTCOME_AGREED
            else common_pb2.LABEL_UNSPECIFIED
        )
        return debate_pb2.AssessResponse(
            label=label,
            outcome=outcome,
            rounds=[debate_pb2.DebateRound(number=1)],
            item_id=request.item_id,
            usage=common_pb2.TokenUsage(prompt_tokens=100, completion_tokens=20),
        )


def start(script: Script) -> ServiceHost:
    """A started host serving all five scripted stages on a free loopback port."""
    bindings = [
        ServiceBinding(
            "tribunal.v1.RetrievalService",
            lambda s: retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(
                _Retrieval(script), s
            ),
        ),
        ServiceBinding(
            "tribunal.v1.EnsembleService",
            lambda s: ensemble_pb2_grpc.add_EnsembleServiceServicer_to_server(_Ensemble(script), s),
        ),
        ServiceBinding(
            "tribunal.v1.EntailmentService",
            lambda s: entailment_pb2_grpc.add_EntailmentServiceServicer_to_server(
                _Entailment(script), s
            ),
        ),
        ServiceBinding(
            "tribunal.v1.ConfidenceService",
            lambda s: confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server(
                _Confidence(script), s
            ),
        ),
        ServiceBinding(
            "tribunal.v1.DebateService",
            lambda s: debate_pb2_grpc.add_DebateServiceServicer_to_server(_Debate(script), s),
        ),
    ]
    host = ServiceHost(
        ServerSettings(port=0, metrics_port=None, grace_seconds=0.5),
        name="scripted-stages",
        bindings=bindings,
    )
    host.start()
    assert host.wait_until_ready(10)
    return host
