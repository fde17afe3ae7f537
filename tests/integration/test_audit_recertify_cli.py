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
from tribunal.commands._calibration_signals import write_signals
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
    write_signals(signals, read_traffic(path), [observed[row["audit_id"]] for row in rows], BINDING)
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


def _served_store(tmp_path: Path, alpha: float = 0.2) -> tuple[str, Path, Path, list[dict]]:
    """A calibrator fitted on a first store's audits, served at 0.55 for ``alpha``, and a
    second store of that calibrator's live audits: its URL, the served artifact, the
    recorded signals of the audited queries (the same in both stores: one seed) and the
    first store's audit rows."""
    import dataclasses

    from tribunal.confidence import CalibratorArtifact
    from tribunal.confidence._threshold import RiskThreshold

    first = f"sqlite:///{tmp_path / 'first.db'}"
    observed = _store(first)
    rows, _ = audit_traffic(Database(first), collection="faq", seed=0)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    signals = tmp_path / "signals.jsonl"
    write_signals(signals, read_traffic(path), [observed[row["audit_id"]] for row in rows], BINDING)
    fitted = tmp_path / "fitted.json"
    assert main(
        [
            "calibrate", "--collection", "faq", "--from-audit", "--database-url", first,
            "--from-signals", str(signals), "--alpha", "0.2", "--delta", "0.1",
            "--report", str(tmp_path / "report"), "-o", str(fitted),
        ]
    ) == 0  # fmt: skip
    served = dataclasses.replace(
        CalibratorArtifact.load(fitted),
        thresholds=(RiskThreshold(alpha, 0.1, 0.55, 0, 0, None, 0),),
    )
    served.save(tmp_path / "served.json")
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _store(url, version=served.version, served=0.55)
    return url, tmp_path / "served.json", signals, rows


def test_rethreshold_certifies_a_stricter_threshold_of_the_served_calibrator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tribunal.confidence import CalibratorArtifact

    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))
    url, served_path, _, rows = _served_store(tmp_path)
    served = CalibratorArtifact.load(served_path)
    fitted = tmp_path / "fitted.json"  # fitted on the first store: not these audits' version
    capsys.readouterr()
    output = tmp_path / "rethresholded.json"
    code = main(
        [
            "audit", "--database-url", url, "rethreshold", "--artifact",
            str(served_path), "--alpha", "0.2", "-o", str(output),
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


def test_from_audit_recertify_writes_what_certifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Served α = 0.1: the weighted refit certifies nothing at it, the served calibrator
    re-thresholded on its audited ACCEPTs does. refit (the default) writes the refit and
    says what the re-threshold certifies; rethreshold writes what `tribunal audit
    rethreshold` writes; best certifies each at δ/2 and writes the re-threshold."""
    from tribunal.confidence import CalibratorArtifact

    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TRIBUNAL_CONFIDENCE__ALPHA", "0.1")
    url, served_path, signals, _ = _served_store(tmp_path, alpha=0.1)
    served = CalibratorArtifact.load(served_path)
    capsys.readouterr()

    def recertify(how: str) -> tuple[str, CalibratorArtifact]:
        output = tmp_path / f"{how}.json"
        code = main(
            [
                "calibrate", "--collection", "faq", "--from-audit", "--database-url", url,
                "--from-signals", str(signals), "--seed", "0", "--alpha", "0.1",
                "--delta", "0.1", "--report", str(tmp_path / how), "-o", str(output),
                "--recertify", how, "--served-artifact", str(served_path),
            ]
        )  # fmt: skip
        assert code == 0
        return capsys.readouterr().out, CalibratorArtifact.load(output)

    printed, refit = recertify("refit")
    assert refit.threshold_for(0.1).threshold is None  # the refit, as before: nothing
    assert refit.threshold_for(0.1).method == "ipw-betting"
    assert "the refit certifies no threshold at alpha=0.1" in printed
    assert (
        f"The served calibrator {served.version} re-thresholded on its 284 audited ACCEPTs "
        "certifies alpha=0.1 at 0.552 (bound 0.03977, δ = 0.1)"
    ) in printed
    assert "--recertify rethreshold -o" in printed
    assert "1 − 2δ" in printed

    printed, rethresholded = recertify("rethreshold")
    (threshold,) = rethresholded.thresholds
    assert rethresholded.calibrator.state() == served.calibrator.state()
    assert rethresholded.config["rethreshold"]["served_version"] == served.version
    assert (threshold.method, threshold.delta, threshold.n) == ("clopper-pearson", 0.1, 199)
    assert threshold.threshold == pytest.approx(0.55196, abs=5e-6)
    assert threshold.upper_bound == pytest.approx(0.03977, abs=5e-6)
    # What `tribunal audit rethreshold` writes: the same version.
    command = tmp_path / "command.json"
    assert main(
        [
            "audit", "--database-url", url, "rethreshold", "--artifact", str(served_path),
            "--alpha", "0.1", "--delta", "0.1", "-o", str(command),
        ]
    ) == 0  # fmt: skip
    assert CalibratorArtifact.load(command).version == rethresholded.version
    capsys.readouterr()

    printed, best = recertify("best")
    (threshold,) = best.thresholds
    assert "it is written instead" in printed
    assert best.calibrator.state() == served.calibrator.state()
    assert (threshold.method, threshold.delta) == ("clopper-pearson", 0.05)
    assert threshold.threshold == pytest.approx(0.55196, abs=5e-6)
    assert threshold.upper_bound == pytest.approx(0.0454, abs=5e-5)
    assert best.version != rethresholded.version  # δ/2 is recorded
    # Without --from-audit there is nothing to re-threshold.
    assert (
        main(["calibrate", "--collection", "faq", "--traffic", str(signals), "--recertify", "best"])
        != 0
    )
