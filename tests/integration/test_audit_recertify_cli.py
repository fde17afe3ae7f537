"""`tribunal calibrate --from-audit` end to end on a real audit store: ACCEPTs audited at
0.5 and FALLBACKs at 0.1, reviewed through the queue (a fallback's reviewer picks the entry
that answers it, or none); the command certifies on every label, weighted, or on the
thinned sample with --audit-weighting thin. The candidates' signals are recorded ones
(--from-signals), so no model runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tribunal.audit import AUDIT_REASON, audit_traffic
from tribunal.cli import main
from tribunal.commands.calibrate import _write_signals
from tribunal.confidence import ObservedCandidate, Signals, read_traffic
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord
from tribunal.jobs import ReviewQueue

from tests.unit._confidence_data import BINDING


def _store(
    url: str, n: int = 900, *, version: str = "v1", served: float = 0.55
) -> dict[str, list[ObservedCandidate]]:
    """n served decisions, each audited at its share; the candidates of each audited one."""
    rng = np.random.default_rng(0)
    db = Database(url)
    queue = ReviewQueue(db, votes_per_item=1)
    observed: dict[str, list[ObservedCandidate]] = {}
    for i in range(n):
        right = f"e{i % 40}" if i % 10 else None  # a tenth of the queries: no answer
        quality = float(rng.beta(5, 2) if right and rng.random() < 0.8 else rng.beta(2, 4))
        first = right if right and quality > 0.45 else f"x{i % 7}"
        decision = "ACCEPT" if quality >= served else "FALLBACK"
        p = 0.5 if decision == "ACCEPT" else 0.1
        sampled = rng.random() < p
        audit_id = f"{i:032d}"
        item = None
        if sampled:
            item = EscalationRecord(
                query=f"q{i}",
                chunk="Q: ?\nA: !",
                reason=AUDIT_REASON,
                item_id=audit_id,
                history={"decision": decision, "kb_entry_id": first, "collection": "faq", "p": p},
            )
        _, escalation = db.record_decision(
            DecisionRecord(
                id=audit_id,
                kind="answer",
                query=f"q{i}",
                decision=decision,
                collection="faq",
                confidence=quality,
                versions={"confidence": {"calibrator": version}},
                detail={"audit": {"p": p, "sampled": sampled, "stratum": "x", "min_p": 0.1}},
            ),
            item,
        )
        if not sampled:
            continue
        if decision == "ACCEPT":
            queue.vote("ann", escalation, "relevant" if first == right else "irrelevant")
        else:  # which entry, if any, answers it?
            queue.vote("ann", escalation, "relevant" if right else "irrelevant", entry_id=right)
        noise = rng.normal(0, 0.05)
        observed[audit_id] = [
            ObservedCandidate(
                first,
                Signals(
                    ensemble_p_match=float(np.clip(quality + noise, 0, 1)),
                    retrieval_rank=1,
                    dense_score=float(np.clip(quality * 0.8 + rng.normal(0, 0.1), -1, 1)),
                ),
            ),
            ObservedCandidate(
                f"y{i}",
                Signals(ensemble_p_match=float(rng.beta(1, 6)), retrieval_rank=2, dense_score=0.1),
            ),
        ]
    db.close()
    return observed


@pytest.mark.parametrize(
    "case",
    [
        ("ipw", "every one weighted by its inverse inclusion probability", "ipw-betting"),
        ("thin", "kept after thinning to one inclusion probability", "clopper-pearson"),
    ],
)
def test_from_audit_certifies_on_the_reviewed_items(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[str, str, str],
) -> None:
    weighting, says, method = case
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    observed = _store(url)
    # The same rows the command writes, in its order: their recorded candidates.
    rows, counts = audit_traffic(Database(url), collection="faq", seed=0, weighting=weighting)  # type: ignore[arg-type]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    signals = tmp_path / "signals.jsonl"
    _write_signals(
        signals, read_traffic(path), [observed[row["audit_id"]] for row in rows], BINDING
    )
    report, output = tmp_path / "report", tmp_path / "calibrator.json"
    code = main(
        [
            "calibrate", "--collection", "faq", "--from-audit", "--database-url", url,
            "--audit-weighting", weighting, "--from-signals", str(signals), "--seed", "0",
            "--alpha", "0.2", "--delta", "0.1", "--report", str(report), "-o", str(output),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert f"{counts['reviewed']} reviewed audit items" in printed
    assert says in printed
    written = [
        json.loads(line) for line in (report / "audit-traffic.jsonl").read_text().splitlines()
    ]
    assert written == rows
    # The fallbacks carry the entry their reviewer picked.
    fallbacks = [r for r in written if int(r["audit_id"]) % 10 and r["answers"]]
    assert all(r["answers"] == [f"e{int(r['audit_id']) % 40}"] for r in fallbacks)
    artifact = json.loads(output.read_text())
    assert [t["method"] for t in artifact["thresholds"]] == [method]
    (threshold,) = artifact["thresholds"]
    assert threshold["upper_bound"] <= 0.2  # certified on either
    if weighting == "ipw":
        assert (counts["kept"], counts["reviewed"], threshold["n"]) == (309, 309, 151)
        assert {r["weight"] for r in written} == {0.2, 1.0}
    else:
        assert (counts["kept"], counts["reviewed"], threshold["n"]) == (90, 309, 44)
        assert all("weight" not in r for r in written)


def test_rethreshold_certifies_a_stricter_threshold_of_the_served_calibrator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dataclasses

    from tribunal.confidence import CalibratorArtifact
    from tribunal.confidence._threshold import RiskThreshold

    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))
    first = f"sqlite:///{tmp_path / 'first.db'}"
    observed = _store(first)
    rows, _ = audit_traffic(Database(first), collection="faq", seed=0)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    signals = tmp_path / "signals.jsonl"
    _write_signals(
        signals, read_traffic(path), [observed[row["audit_id"]] for row in rows], BINDING
    )
    fitted = tmp_path / "fitted.json"
    assert main(
        [
            "calibrate", "--collection", "faq", "--from-audit", "--database-url", first,
            "--from-signals", str(signals), "--alpha", "0.2", "--delta", "0.1",
            "--report", str(tmp_path / "report"), "-o", str(fitted),
        ]
    ) == 0  # fmt: skip
    # Served at 0.55 for α = 0.2 (looser than the traffic allows: a quarter of the
    # ACCEPTs are wrong); the live audits of that calibrator are in a second store.
    served = dataclasses.replace(
        CalibratorArtifact.load(fitted),
        thresholds=(RiskThreshold(0.2, 0.1, 0.55, 0, 0, None, 0),),
    )
    served.save(tmp_path / "served.json")
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _store(url, version=served.version, served=0.55)
    capsys.readouterr()
    output = tmp_path / "rethresholded.json"
    code = main(
        [
            "audit", "--database-url", url, "rethreshold", "--artifact",
            str(tmp_path / "served.json"), "--alpha", "0.2", "-o", str(output),
        ]
    )  # fmt: skip
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    new = CalibratorArtifact.load(output)
    (threshold,) = new.thresholds
    # The same calibrator, a stricter certified threshold, another version.
    assert new.calibrator.state() == served.calibrator.state()
    assert new.version != served.version == printed["served_version"]
    assert threshold.method == "clopper-pearson"  # one ACCEPT share: no weights
    assert threshold.threshold is not None
    assert threshold.threshold > 0.55
    assert threshold.upper_bound is not None
    assert threshold.upper_bound <= 0.2
    assert (printed["audited_accepts"], threshold.n) == (
        sum(1 for r in rows if "weight" in r and r["weight"] < 1),
        printed["audited_accepts"] - round(0.3 * printed["audited_accepts"]),
    )
    assert new.config["rethreshold"]["served_threshold"] == 0.55
    # Another version's audits are not this calibrator's: a clear refusal.
    refused = main(
        ["audit", "--database-url", url, "rethreshold", "--artifact", str(fitted),
         "--alpha", "0.2", "-o", str(tmp_path / "x.json")]
    )  # fmt: skip
    assert refused != 0
    assert "no reviewed audited ACCEPTs of calibrator" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
