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
the shift warning, as ``tribunal calibrate --from-audit --audit-since`` does: every
audited label, weighted by its inverse inclusion probability (what is served from then
on); the former thinning to one share, and the served calibrator re-thresholded on its
audited ACCEPTs (``tribunal audit rethreshold``), are certified beside it. Each certifies
α and 0.3 (a looser target, to compare where α is out of reach), and what each threshold
would serve on the queries after the re-certification is counted (``recertified_by``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Replay", "write_report"]

_SEGMENTS = ("before", "shifted", "safe_mode", "recertified")


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
        self.thinned: Any = None
        """The artifact thinning would have certified (counted beside, never served)."""
        self.served_scale: Any = None
        """The served calibrator at the stricter thresholds its audited ACCEPTs certify
        (counted beside, never served)."""

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

    def _count(self, artifact: Any, alpha: float, index: int, stats: dict[str, Any]) -> None:
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

    # -- the run --------------------------------------------------------------------------

    def run(self, live: list[tuple[str, int]], *, kinds: list[str]) -> dict[str, Any]:
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
            if segment == "recertified" and self.thinned is not None:
                for alpha in alphas:
                    self._count(self.artifact, alpha, index, by[f"ipw@{alpha}"])
                    self._count(self.thinned, alpha, index, by[f"thin@{alpha}"])
                    self._count(self.served_scale, alpha, index, by[f"served@{alpha}"])
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
                events["recertification"] = self._recertify(since, position)
                segment = "recertified"
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
            },
            "segments": {name: _rates(s) for name, s in stats.items() if s["queries"]},
            "recertified_by": {k: _rates(v) for k, v in by.items() if v["queries"]},
            "events": events,
            "trace": self.trace,
        }

    def _audited(self) -> int:
        return 0 if self.state is None else int(self.state.audited)

    @staticmethod
    def _after(shift_start: int | None, position: int) -> dict[str, Any]:
        return {} if shift_start is None else {"queries_after_shift": position - shift_start + 1}

    def _recertify(self, since: dt.datetime | None, position: int) -> dict[str, Any]:
        """What ``tribunal calibrate --from-audit --audit-since`` does, on cached signals:
        weighted (served from here on), and thinned (certified beside, for comparison)."""
        old = self.artifact.version
        served, self.served_scale = self._certify_served(since)
        weighted, self.artifact = self._certify_audits(since, "ipw")
        thinned, self.thinned = self._certify_audits(since, "thin")
        return {
            "query": position,
            "old_version": old,
            "new_version": self.artifact.version,
            **weighted,
            "thinned": thinned,
            "served_scale": served,
        }

    def _certify_served(self, since: dt.datetime | None) -> tuple[dict[str, Any], Any]:
        """The served calibrator's stricter threshold certified on its audited ACCEPTs."""
        from tribunal.audit import served_accepts
        from tribunal.confidence import served_threshold

        served = self.artifact.threshold_for(self.args.alpha).threshold
        sample = served_accepts(
            self.db,
            collection=self.collection,
            calibrator_version=self.artifact.version,
            served=served,
            since=since,
        )
        chosen = {
            alpha: served_threshold(
                sample.confidence,
                sample.correct,
                sample.weight,
                served=served,
                alpha=alpha,
                delta=0.1,
            )
            for alpha in sorted({self.args.alpha, 0.3})
        }
        mine = chosen[self.args.alpha]
        report = {
            "accepts": int(sample.confidence.size),
            "served_threshold": served,
            "method": mine.method,
            "threshold": mine.threshold,
            "upper_bound": mine.upper_bound,
            "certified": mine.certified,
            "certify_accepted": mine.accepted,
            "certify_items": mine.n,
            "per_alpha": [
                {"alpha": a, "threshold": t.threshold, "upper_bound": t.upper_bound}
                for a, t in chosen.items()
            ],
        }
        return report, _Rethresholded(self.artifact, chosen)

    def _certify_audits(
        self, since: dt.datetime | None, weighting: str
    ) -> tuple[dict[str, Any], Any]:
        from tribunal.audit import audit_traffic, write_audit_traffic
        from tribunal.confidence import CalibrationConfig, calibrate, read_traffic

        rows, counts = audit_traffic(
            self.db,
            collection=self.collection,
            votes_per_item=1,
            seed=self.args.seed,
            since=since,
            weighting=weighting,  # type: ignore[arg-type]
        )
        path = write_audit_traffic(rows, self.args.out / f"recertify-{weighting}.jsonl")
        traffic = read_traffic(path)
        observed = [self.observed[self.audit_index[row["audit_id"]]] for row in rows]
        result = calibrate(
            traffic,
            observed,
            CalibrationConfig(
                alphas=tuple(sorted({0.1, 0.2, self.args.alpha, 0.3})),
                delta=0.1,
                seed=self.args.seed,
            ),
            self.binding,
            created="2026-12-02T00:00:00+00:00",
        )
        threshold = result.artifact.threshold_for(self.args.alpha)
        report = {
            **counts,
            "split": result.report["traffic"]["split"],
            "method": threshold.method,
            "threshold": threshold.threshold,
            "upper_bound": threshold.upper_bound,
            "certified": threshold.certified,
            "certify_accepted": threshold.accepted,
            "certify_items": threshold.n,
            "per_alpha": [
                {
                    "alpha": t.alpha,
                    "threshold": t.threshold,
                    "upper_bound": t.upper_bound,
                    "certify_accepted": t.accepted,
                }
                for t in result.artifact.thresholds
            ],
        }
        return report, result.artifact


class _Rethresholded:
    """A calibrator artifact with other thresholds (what ``_count`` reads)."""

    def __init__(self, artifact: Any, thresholds: dict[float, Any]) -> None:
        self.artifact, self.thresholds = artifact, thresholds

    def predict(self, signals: Any) -> Any:
        return self.artifact.predict(signals)

    def threshold_for(self, alpha: float) -> Any:
        return self.thresholds[alpha]


def _rates(stats: dict[str, Any]) -> dict[str, Any]:
    queries, accepted = stats["queries"], stats["accepted"]
    return {
        **stats,
        "coverage": round(accepted / queries, 4) if queries else None,
        "hallucination": round(stats["wrong"] / accepted, 4) if accepted else None,
        "labels_per_1000": round(1000 * stats["labels"] / queries, 1) if queries else None,
    }


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """JSON, a markdown table and the bound's plot."""
    json_path = out / "live-audit.json"
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    lines = [
        "| segment | queries | accepted | coverage | wrong | live hallucination rate | "
        "out-of-scope accepted | reviewer labels | labels / 1,000 queries |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["segments"].items():
        lines.append(
            f"| {name} | {s['queries']} | {s['accepted']} | {s['coverage']} | {s['wrong']} | "
            f"{s['hallucination']} | {s['accepted_oos']} | {s['labels']} | "
            f"{s['labels_per_1000']} |"
        )
    for name, r in (report.get("recertified_by") or {}).items():
        lines.append(
            f"| after re-certifying, {name} (what it would serve) | {r['queries']} | "
            f"{r['accepted']} | {r['coverage']} | {r['wrong']} | {r['hallucination']} | — | — | — |"
        )
    lines += ["", "```json", json.dumps(report["events"], indent=2, sort_keys=True), "```"]
    lines += ["", f"`{report.get('command', '')}` ({report.get('date', '')})"]
    md_path = out / "live-audit.md"
    md_path.write_text("\n".join(lines) + "\n")
    written = [json_path, md_path]
    trace = [t for t in report["trace"] if t["audited"]]
    if trace:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 3.5))
        for version in dict.fromkeys(t["calibrator"] for t in trace):
            points = [t for t in trace if t["calibrator"] == version]
            xs = [t["audited"] for t in points]
            axis.fill_between(
                xs, [t["lower"] for t in points], [t["upper"] for t in points], alpha=0.3,
                label=f"cumulative bound, {version}",
            )  # fmt: skip
            restarted = [t for t in points if t.get("restarts")]
            if restarted:
                axis.fill_between(
                    [t["audited"] for t in restarted],
                    [t["restart_lower"] for t in restarted],
                    [t["restart_upper"] for t in restarted],
                    alpha=0.3, hatch="//", label=f"restarted bound, {version}",
                )  # fmt: skip
        axis.axhline(report["settings"]["alpha"], color="red", linestyle="--", label="alpha")
        axis.set_xlabel("audited accepted answers (per calibrator)")
        axis.set_ylabel("hallucination rate")
        axis.set_ylim(0, 1)
        axis.legend(fontsize=7)
        figure.tight_layout()
        png = out / "live-audit.png"
        figure.savefig(png, dpi=120)
        plt.close(figure)
        written.append(png)
    return written
