"""The live replay of ``tribunal-lab live-audit``: decisions, audits, reviews, fail-safe.

Each live query is decided by the gateway's rule on its cached signals — the candidate
with the highest calibrated confidence, accepted at or above the certified threshold,
unless the collection's live state puts it in safe mode (read through the gateway's
``LiveAudit`` before each decision, as the gateway does) — and written to a real audit
store with the gateway's audit coin. A sampled decision is reviewed at once by a
simulated reviewer who answers from the ground truth (the query's intent: for an ACCEPT,
whether the served entry answers it; for a FALLBACK, which entry, if any, does); the vote goes
through the review queue, whose hook runs the live monitor (which restarts a fresh bound
when the shift warning comes on). The safe mode lasts ``--safe-queries`` queries (the
operator's reaction time); then the collection is re-certified on the items audited since
the shift warning, as ``tribunal calibrate --from-audit --audit-since --recertify`` does
(:mod:`._live_audit_recertify`): the artifact ``--recertify`` picks is *served* from then
on, under the same live monitor (it may trip again), and the other candidates are counted
beside on the same queries (``recertified_by``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._live_audit_recertify import recertify
from ._live_audit_report import rates

__all__ = ["Replay"]

_SEGMENTS = ("before", "shifted", "safe_mode", "recertified", "safe_mode_again")


def _segment_stats() -> dict[str, Any]:
    return {"queries": 0, "accepted": 0, "wrong": 0, "labels": 0, "accepted_oos": 0}


class Replay:
    def __init__(
        self,
        *,
        args: argparse.Namespace,
        collection: str,
        artifact: Any,
        binding: Any,
        observed: Any,
        traffic: Any,
        database_url: str,
    ) -> None:
        from tribunal.audit import LiveMonitor
        from tribunal.core.settings import AuditSettings
        from tribunal.core.storage import Database
        from tribunal.gateway._live_audit import LiveAudit
        from tribunal.jobs import ReviewQueue

        path = Path(database_url.removeprefix("sqlite:///"))
        for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            stale.unlink(missing_ok=True)
        self.args = args
        self.collection = collection
        self.artifact = artifact
        self.binding = binding
        self.observed = observed
        self.traffic = traffic
        self.db = Database(database_url)
        self.settings = AuditSettings(
            accept_share=args.accept_share,
            fallback_share=args.fallback_share,
            seed=args.seed,
            daily_budget=10_000_000,
            votes_per_item=1,
            delta=args.delta,
            safe_mode="fallback",
        )
        self.live = LiveAudit(self.settings, self.db)
        self.monitor = LiveMonitor(self.db, self.settings)
        self.queue = ReviewQueue(self.db, votes_per_item=1, on_vote=self._reviewed)
        self.state: Any = None
        self.shift: Any = None
        self.trace: list[dict[str, Any]] = []
        self.audit_index: dict[str, int] = {}
        self.beside: dict[str, Any] = {}
        """After re-certifying: the candidates counted beside the served one, by name."""

    # -- the monitor, after each review ---------------------------------------------------

    def _reviewed(self, _item_id: str) -> None:
        self.state, self.shift = self.monitor.refresh(
            collection=self.collection,
            calibrator_version=self.artifact.version,
            alpha=self.args.alpha,
            reference=self.artifact.reference,
            actor="simulated-review",
        )
        self.trace.append(
            {
                "calibrator": self.artifact.version,
                "accepted": self.state.accepted,
                "audited": self.state.audited,
                "lower": self.state.lower,
                "upper": self.state.upper,
                "shift_p": self.state.shift_p_value,
                "restarts": self.state.restarts,
                "restart_audited": self.state.restart_audited,
                "restart_lower": self.state.restart_lower,
                "restart_upper": self.state.restart_upper,
            }
        )

    # -- one decision ---------------------------------------------------------------------

    def _decide(self, index: int) -> tuple[str, str, float | None, str | None]:
        from tribunal.audit import NORMAL

        candidates = self.observed[index]
        if not candidates:
            return "FALLBACK", "NO_CANDIDATE", None, None
        scores = self.artifact.predict([c.signals for c in candidates])
        best = int(np.argmax(scores))
        confidence = float(scores[best])
        entry = candidates[best].entry_id
        threshold = self.artifact.threshold_for(self.args.alpha).threshold
        if self.live.mode(self.collection, self.artifact.version) != NORMAL:
            return "FALLBACK", "NO_CERTIFIED_THRESHOLD", confidence, entry
        if threshold is None:
            return "FALLBACK", "NO_CERTIFIED_THRESHOLD", confidence, entry
        if confidence >= threshold:
            return "ACCEPT", "", confidence, entry
        return "FALLBACK", "LOW_CONFIDENCE", confidence, entry

    def _serve(self, index: int, segment: str, stats: dict[str, Any], kind: str) -> bool:
        """Decide, audit, review; True when the item was sampled for review."""
        from tribunal.core.storage import DecisionRecord

        query = self.traffic.queries[index]
        decision, reason, confidence, entry = self._decide(index)
        audit_id = hashlib.sha256(f"live:{self.args.seed}:{index}".encode()).hexdigest()[:32]
        review_entry = None
        if entry is not None:
            review_entry = {"id": entry, "question": "", "answer": "", "calibrator": ""}
        draw, item = self.live.sample(
            audit_id,
            decision=decision,
            confidence=confidence,
            query=query.query,
            collection=self.collection,
            entry=review_entry,
            calibrator_version=self.artifact.version,
        )
        dense = [c.signals.dense_score for c in self.observed[index] if c.signals.dense_score]
        _, escalation = self.db.record_decision(
            DecisionRecord(
                id=audit_id,
                kind="answer",
                query=query.query,
                decision=decision,
                collection=self.collection,
                reason=reason,
                confidence=confidence,
                kb_entry_id=entry if decision == "ACCEPT" and entry else "",
                signals={"top": {"signals": {"dense_score": max(dense)}}} if dense else {},
                versions={"confidence": {"calibrator": self.artifact.version}},
                detail={"audit": draw.to_json(), "segment": segment},
            ),
            item,
        )
        stats["queries"] += 1
        right = entry is not None and query.is_right(entry)
        if decision == "ACCEPT":
            stats["accepted"] += 1
            stats["wrong"] += int(not right)
            stats["accepted_oos"] += int(kind != "in_scope")
        if item is None:
            return False
        stats["labels"] += 1
        self.audit_index[audit_id] = index
        # The simulated reviewer answers from the ground truth: does the served entry answer
        # it (ACCEPT); which entry, if any, does (FALLBACK)?
        if decision == "FALLBACK":
            picked = min(query.answers) if query.answers else None
            label = "relevant" if picked else "irrelevant"
            self.queue.vote("simulated-reviewer", escalation, label, entry_id=picked)
        else:
            label = "relevant" if right else "irrelevant"
            self.queue.vote("simulated-reviewer", escalation, label)
        return True

    def _count(
        self, artifact: Any, alpha: float, index: int, stats: dict[str, Any], kind: str
    ) -> None:
        """What ``artifact``'s threshold for ``alpha`` would serve on this query."""
        candidates = self.observed[index]
        threshold = artifact.threshold_for(alpha).threshold
        stats["queries"] += 1
        if not candidates or threshold is None:
            return
        scores = artifact.predict([c.signals for c in candidates])
        best = int(np.argmax(scores))
        if float(scores[best]) >= threshold:
            stats["accepted"] += 1
            stats["wrong"] += int(
                not self.traffic.queries[index].is_right(candidates[best].entry_id)
            )
            stats["accepted_oos"] += int(kind != "in_scope")

    # -- the run --------------------------------------------------------------------------

    def run(self, live: list[tuple[str, int]], *, kinds: list[str]) -> dict[str, Any]:
        from tribunal.audit import NORMAL

        stats = {name: _segment_stats() for name in _SEGMENTS}
        alphas = sorted({self.args.alpha, 0.3})
        kinds_of = ("ipw", "thin", "served")
        by = {f"{w}@{a}": _segment_stats() for w in kinds_of for a in alphas}
        events: dict[str, Any] = {}
        segment = "before"
        shift_start: int | None = None
        since: dt.datetime | None = None
        tripped_at = 0
        started = time.perf_counter()
        for position, (phase, index) in enumerate(live):
            if phase == "after" and segment == "before":
                segment, shift_start = "shifted", position
                events["shift_start"] = {"audited_in_stream": self._audited()}
            self._serve(index, segment, stats[segment], kinds[index])
            # After re-certifying: the candidates counted beside (none before).
            for name, artifact in self.beside.items():
                for alpha in alphas:
                    self._count(artifact, alpha, index, by[f"{name}@{alpha}"], kinds[index])
            warning = self.state is not None and self.state.shift_warning
            if warning and "shift_warning" not in events:
                events["shift_warning"] = {
                    "segment": segment,
                    "query": position,
                    **self._after(shift_start, position),
                }
                if segment == "shifted":
                    since = dt.datetime.now(dt.UTC)
            restarts = 0 if self.state is None else self.state.restarts
            if restarts and "restart" not in events:
                events["restart"] = {
                    "segment": segment,
                    "query": position,
                    **self._after(shift_start, position),
                    "reason": self.state.detail["restarts"][-1]["reason"],
                    "audited_in_stream": self.state.audited,
                }
            if segment == "shifted" and self.state is not None and self.state.mode != "normal":
                segment, tripped_at = "safe_mode", position
                events["trip"] = {
                    "query": position,
                    **self._after(shift_start, position),
                    "audited_in_stream": self.state.audited,
                    "audited_since_shift": self.state.audited
                    - events["shift_start"]["audited_in_stream"],
                    "audited_since_restart": self.state.restart_audited,
                    "why": self.state.detail.get("entered", {}).get("why"),
                    "lower": self.state.lower,
                    "upper": self.state.upper,
                    "restart_lower": self.state.restart_lower,
                    "restart_upper": self.state.restart_upper,
                }
                if since is None:
                    since = dt.datetime.now(dt.UTC)
            if segment == "safe_mode" and position - tripped_at >= self.args.safe_queries:
                events["recertification"] = recertify(self, since, position)
                segment = "recertified"
            elif segment == "recertified" and self.state.mode_for(self.artifact.version) != NORMAL:
                # The monitor, running on the served artifact, tripped again.
                segment = "safe_mode_again"
                events["trip_after_recertification"] = self._tripped_again(events, position)
            if (position + 1) % 500 == 0 or position + 1 == len(live):
                rate = (position + 1) / (time.perf_counter() - started)
                print(
                    f"{position + 1}/{len(live)} queries ({segment}), {rate:.0f}/s, "
                    f"ETA {(len(live) - position - 1) / rate:.0f} s",
                    flush=True,
                )
        return {
            "settings": {
                "alpha": self.args.alpha,
                "delta": self.args.delta,
                "accept_share": self.args.accept_share,
                "fallback_share": self.args.fallback_share,
                "safe_queries": self.args.safe_queries,
                "recertify": self.args.recertify,
            },
            "segments": {name: rates(s) for name, s in stats.items() if s["queries"]},
            "recertified_by": {k: rates(v) for k, v in by.items() if v["queries"]},
            "events": events,
            "trace": self.trace,
        }

    def _tripped_again(self, events: dict[str, Any], position: int) -> dict[str, Any]:
        return {
            "query": position,
            "queries_after_recertification": position - events["recertification"]["query"],
            "audited_in_stream": self.state.audited,
            "why": self.state.detail.get("entered", {}).get("why"),
            "lower": self.state.lower,
            "upper": self.state.upper,
            "restart_lower": self.state.restart_lower,
            "restart_upper": self.state.restart_upper,
        }

    def _audited(self) -> int:
        return 0 if self.state is None else int(self.state.audited)

    @staticmethod
    def _after(shift_start: int | None, position: int) -> dict[str, Any]:
        return {} if shift_start is None else {"queries_after_shift": position - shift_start + 1}
