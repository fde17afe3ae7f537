"""CrowdRAG-25 ratings: reader, and the reproduction of the authors' MACE gold labels.

``ratings.jsonl.gz`` (shared/data/crowdrag25, README there) has one row per ordered
response pair: five workers' votes ``A``/``N``/``B`` on seven utility dimensions (no
``N`` for overall quality), and per dimension the authors' MACE output: each worker's
spam probability, the posterior ``p_a``/``p_n``/``p_b`` and ``gold`` = its argmax.

How the authors made ``gold`` (scripts/create_ratings_artifact.py and src/mace/mace.py
of their repository, webis-de/sigir25-rag-crowdsourcing): one MACE fit per dimension on
every pair (task = ``{response_a}_{response_b}``), variational M-step with Beta(0.5, 0.5)
and Dirichlet(10) priors, 100 iterations (stop early at |Δ log-likelihood| < 1e-6), best
of 20 restarts initialised by the *unseeded* ``np.random.random``. Their Krippendorff's
α is ordinal over ``A < N < B`` with the ``krippendorff`` package (notebooks/4-agreement);
α(C*) keeps the votes of workers with spam probability ≤ 0.7 on one direction per
unordered pair.

:func:`reproduce` runs our aggregation on the same votes and reports, per dimension,
agreement with ``gold`` and α next to the paper's Table 4, plus the diagnostics that
explain where we differ (docs/results/, label aggregation).
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm
from tribunal.core import InvalidArgumentError, parse_jsonl
from tribunal.jobs._aggregate import AggregationResult, aggregate, agreement

__all__ = [
    "CROWDRAG_DIMENSIONS",
    "CROWDRAG_PAPER_ALPHA",
    "CrowdRagRatings",
    "DimensionReport",
    "authors_mace",
    "read_crowdrag",
    "report_json",
    "reproduce_crowdrag",
    "reproduce_dimension",
    "reproduction_markdown",
]

CROWDRAG_DIMENSIONS: tuple[str, ...] = (
    "correctness_topical",
    "coherence_logical",
    "coherence_stylistic",
    "coverage_broad",
    "coverage_deep",
    "consistency_internal",
    "quality_overall",
)
# The scale the authors' ordinal α uses: A better < no difference < B better.
SCALE: tuple[str, ...] = ("a", "n", "b")
# Table 4 of arXiv 2504.15689, "Complete Data": α(C) all votes, α(C*) competency-corrected.
CROWDRAG_PAPER_ALPHA: dict[str, tuple[float, float]] = {
    "correctness_topical": (0.19, 0.43),
    "coherence_logical": (0.18, 0.39),
    "coherence_stylistic": (0.11, 0.38),
    "coverage_broad": (0.28, 0.44),
    "coverage_deep": (0.28, 0.45),
    "consistency_internal": (0.14, 0.42),
    "quality_overall": (0.17, 0.39),
}
# The authors' α(C*) filter: a worker's votes count when their spam probability ≤ this.
SPAM_THRESHOLD = 0.7


@dataclass(frozen=True)
class CrowdRagRatings:
    """The ratings file as frames; tasks are ``{response_a}_{response_b}`` (the authors' ids)."""

    pairs: pd.DataFrame
    """One row per task: task, submission_id, query_id, response_a, response_b."""
    votes: pd.DataFrame
    """One row per vote: task, worker, dimension, label (``a``/``n``/``b``), spam (the
    authors' spam probability of that worker on that dimension)."""
    gold: pd.DataFrame
    """One row per (task, dimension): label and p_a, p_n, p_b (p_n NaN for overall quality)."""

    @property
    def n_tasks(self) -> int:
        return len(self.pairs)

    @property
    def n_workers(self) -> int:
        return int(self.votes["worker"].nunique())

    def dimension_votes(self, dimension: str) -> pd.DataFrame:
        """Columns task, worker, label for one dimension."""
        _check_dimension(dimension)
        rows = self.votes[self.votes["dimension"] == dimension]
        return rows.loc[:, ["task", "worker", "label"]].reset_index(drop=True)

    def gold_labels(self, dimension: str) -> pd.Series:
        _check_dimension(dimension)
        rows = self.gold[self.gold["dimension"] == dimension]
        return pd.Series(rows["label"].to_numpy(), index=rows["task"].to_numpy(), name="gold")

    def spam_probability(self, dimension: str) -> pd.Series:
        """The authors' per-worker spam probability (1 − MACE competence) on ``dimension``."""
        _check_dimension(dimension)
        rows = self.votes[self.votes["dimension"] == dimension]
        first = rows.drop_duplicates("worker").set_index("worker")["spam"]
        return first.sort_index()


def _check_dimension(dimension: str) -> None:
    if dimension not in CROWDRAG_DIMENSIONS:
        raise InvalidArgumentError(
            f"unknown CrowdRAG-25 dimension {dimension!r}; use one of "
            + ", ".join(CROWDRAG_DIMENSIONS)
        )


def read_crowdrag(path: str | Path) -> CrowdRagRatings:
    """Read ``ratings.jsonl.gz`` (or an uncompressed copy)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgumentError(
            f"{path}: no such file; the CrowdRAG-25 ratings are "
            "shared/data/crowdrag25/ratings.jsonl.gz"
        )
    opener: Any = gzip.open if path.suffix == ".gz" else open
    pairs: list[dict[str, Any]] = []
    votes: list[tuple[str, str, str, str, float]] = []
    gold: list[dict[str, Any]] = []
    with opener(path, "rb") as handle:
        for where, _, row in parse_jsonl(handle, str(path), field="data"):
            try:
                task = f"{row['response_a']}_{row['response_b']}"
                pairs.append(
                    {
                        "task": task,
                        "submission_id": row["submission_id"],
                        "query_id": row["query_id"],
                        "response_a": row["response_a"],
                        "response_b": row["response_b"],
                    }
                )
                workers = row["worker"]
                for dim in CROWDRAG_DIMENSIONS:
                    labels = row[f"{dim}_vote"]
                    spams = row[f"{dim}_spam_probability"]
                    if not len(labels) == len(spams) == len(workers):
                        raise InvalidArgumentError(
                            f"{where}: {dim} has {len(labels)} votes for {len(workers)} workers"
                        )
                    votes.extend(
                        (task, w, dim, str(v).lower(), float(s))
                        for w, v, s in zip(workers, labels, spams, strict=True)
                    )
                    gold.append(
                        {
                            "task": task,
                            "dimension": dim,
                            "label": str(row[f"{dim}_gold"]).lower(),
                            **{f"p_{k}": row.get(f"{dim}_p_{k}", np.nan) for k in SCALE},
                        }
                    )
            except KeyError as exc:
                raise InvalidArgumentError(
                    f"{where}: missing field {exc.args[0]!r}; is this the CrowdRAG-25 ratings file?"
                ) from exc
    frame = pd.DataFrame(votes, columns=["task", "worker", "dimension", "label", "spam"])
    if pairs and len({p["task"] for p in pairs}) != len(pairs):
        raise InvalidArgumentError(f"{path}: a response pair appears twice")
    return CrowdRagRatings(pairs=pd.DataFrame(pairs), votes=frame, gold=pd.DataFrame(gold))


@dataclass(frozen=True)
class DimensionReport:
    """Our aggregation of one dimension next to the authors' gold and the paper's α."""

    dimension: str
    n_tasks: int
    n_votes: int
    n_workers: int
    mace_agreement: float
    """Share of tasks where our MACE label equals ``gold``."""
    majority_agreement: float
    ds_agreement: float
    alpha_ordinal: float
    """Krippendorff's α, ordinal a < n < b, every vote (the paper's α(C))."""
    paper_alpha: float
    alpha_nominal: float
    fleiss_kappa: float | None
    alpha_corrected_theirs: float
    """α(C*) recomputed from the authors' published spam probabilities."""
    alpha_corrected_ours: float
    """α(C*) with our MACE spam probabilities (1 − competence) instead."""
    paper_alpha_corrected: float
    gold_from_their_competence: float
    """Agreement with ``gold`` of one MACE E-step that uses the authors' published
    per-worker spam probabilities and uniform spamming strategies: how far the authors'
    competences alone determine their gold."""
    competence_correlation: float
    """Pearson r of our and the authors' per-worker spam probabilities."""
    restart_agreement_median: float
    """Median agreement of the other restarts' labels with the kept restart's labels."""
    restart_agreement_min: float
    replicate_gold_agreement: tuple[float, ...]
    """Agreement with ``gold`` of the authors' own MACE (:func:`authors_mace`) re-run
    with other random starts, one value per replicate."""
    replicate_pairwise_agreement: float
    """Median agreement between two of those replicates."""
    replicate_ours_agreement: float
    """Median agreement of our MACE labels with those replicates."""
    n_disagree: int
    disagree_no_majority: int
    """Disagreements on tasks with no 3-of-5 majority in the votes."""
    disagree_gold_uncertain: int
    """Disagreements where the authors' own posterior of ``gold`` is below 0.6."""
    disagree_ours_uncertain: int
    """Disagreements where our posterior of our label is below 0.6."""
    log_likelihood: float
    seconds: float


def _agree(labels: pd.Series, gold: pd.Series) -> float:
    return float((labels.reindex(gold.index) == gold).mean())


def _corrected_alpha(
    votes: pd.DataFrame, spam: pd.Series, pairs: pd.DataFrame, order: Sequence[str]
) -> float:
    """The authors' α(C*): one direction per unordered pair (the first in file order),
    votes of workers with spam probability ≤ 0.7, ordinal α over the scale."""
    unordered = pairs.assign(
        key=[tuple(sorted(ab)) for ab in zip(pairs["response_a"], pairs["response_b"], strict=True)]
    ).drop_duplicates("key")
    kept = votes[votes["task"].isin(set(unordered["task"]))]
    kept = kept[kept["worker"].map(spam) <= SPAM_THRESHOLD]
    counts = kept.groupby("task").size()
    kept = kept[kept["task"].map(counts) >= 2]
    result = agreement(kept, order, ordinal=True).alpha_ordinal
    assert result is not None
    return result


def _posterior_from_spam(votes: pd.DataFrame, spam: pd.Series, order: Sequence[str]) -> pd.Series:
    """MACE's E-step with given spam probabilities and uniform strategies (diagnostic)."""
    codes = {label: i for i, label in enumerate(order)}
    tasks, task_index = pd.factorize(votes["task"])
    answer = votes["label"].map(codes).to_numpy()
    s = votes["worker"].map(spam).to_numpy(dtype=float)
    k = len(order)
    factors = (s / k)[:, None] + (1 - s)[:, None] * (answer[:, None] == np.arange(k)[None, :])
    logs = np.zeros((len(task_index), k))
    np.add.at(logs, tasks, np.log(factors))
    return pd.Series(np.asarray(order, dtype=object)[logs.argmax(axis=1)], index=task_index)


def authors_mace(
    votes: pd.DataFrame,
    order: Sequence[str],
    rng: np.random.Generator,
    *,
    n_restarts: int = 20,
    n_iter: int = 100,
    tol: float = 1e-6,
) -> pd.Series:
    """The authors' MACE (src/mace/mace.py of their repository), vectorised, for one
    purpose: re-running *their* procedure with other random starts shows how far their
    published gold depends on the draw. Same model as crowd-kit's ``MACE(method="vb")``,
    but initialised from uniform(0, 1) draws, 0.1/K smoothing added to the VB counts,
    and an early stop at |Δ log-likelihood| < ``tol``. Not used to make labels."""
    from scipy.special import digamma

    k = len(order)
    task, tasks = pd.factorize(votes["task"])
    worker, workers = pd.factorize(votes["worker"])
    answer = votes["label"].map({label: i for i, label in enumerate(order)}).to_numpy()
    n_tasks, n_workers = len(tasks), len(workers)
    onehot = answer[:, None] == np.arange(k)[None, :]
    prior = np.array([0.5, 0.5]) + 0.1 / k
    strategy_prior = 10.0 + 0.1 / k

    def e_step(spam: np.ndarray, strat: np.ndarray) -> tuple[float, np.ndarray]:
        factors = (spam[worker, 0] * strat[worker, answer])[:, None] + spam[worker, 1][
            :, None
        ] * onehot
        logs = np.full((n_tasks, k), -np.log(k))
        np.add.at(logs, task, np.log(factors))
        top = logs.max(axis=1, keepdims=True)
        weights = np.exp(logs - top)
        total = weights.sum(axis=1, keepdims=True)
        return float((top + np.log(total)).sum()), weights / total

    best: tuple[float, np.ndarray] | None = None
    for _ in range(n_restarts):
        spam = rng.random((n_workers, 2))
        spam /= spam.sum(axis=1, keepdims=True)
        strat = rng.random((n_workers, k))
        strat /= strat.sum(axis=1, keepdims=True)
        current = -np.inf
        for _ in range(n_iter):
            ll, posterior = e_step(spam, strat)
            if abs(ll - current) < tol:
                break
            current = ll
            guessed = spam[worker, 0] * strat[worker, answer]
            p_true = posterior[task, answer]
            knowing = p_true * spam[worker, 1] / (guessed + spam[worker, 1])
            counts = np.zeros((n_workers, 2))
            np.add.at(counts[:, 1], worker, knowing)
            np.add.at(counts[:, 0], worker, 1.0 - knowing)
            strategy = np.zeros((n_workers, k))
            np.add.at(strategy, (worker, answer), 1.0 - knowing)
            counts += prior
            strategy += strategy_prior
            spam = np.exp(digamma(counts) - digamma(counts.sum(axis=1, keepdims=True)))
            strat = np.exp(digamma(strategy) - digamma(strategy.sum(axis=1, keepdims=True)))
        if best is None or current > best[0]:
            best = (current, e_step(spam, strat)[1])
    assert best is not None
    labels = np.asarray(order, dtype=object)[best[1].argmax(axis=1)]
    return pd.Series(labels, index=tasks)


def _has_majority(votes: pd.DataFrame) -> pd.Series:
    counts = pd.crosstab(votes["task"], votes["label"])
    share = counts.max(axis=1) / counts.sum(axis=1)
    return share > 0.5


def reproduce_dimension(
    ratings: CrowdRagRatings,
    dimension: str,
    *,
    seed: int = 0,
    n_restarts: int = 20,
    n_iter: int = 100,
    replicates: int = 5,
) -> tuple[DimensionReport, AggregationResult]:
    """MACE (and majority, Dawid–Skene) on one dimension, compared with the authors';
    ``replicates`` re-runs of the authors' own MACE (seeded from ``seed``) for context."""
    started = time.perf_counter()
    votes = ratings.dimension_votes(dimension)
    gold = ratings.gold_labels(dimension)
    # Overall quality has no "n" option; the scale keeps it so ordinal α uses the same
    # value domain as the authors' (["A", "N", "B"] for every dimension).
    order = SCALE if dimension != "quality_overall" else ("a", "b")
    mace = aggregate(
        votes,
        "mace",
        seed,
        labels=order,
        ordinal=True,
        n_restarts=n_restarts,
        n_iter=n_iter,
    )
    majority = aggregate(votes, "majority", seed, labels=order)
    ds = aggregate(votes, "ds", seed, labels=order)
    theirs = ratings.spam_probability(dimension)
    ours = (1.0 - mace.competence).reindex(theirs.index)
    agreement_all = agreement(votes, SCALE, ordinal=True)
    assert agreement_all.alpha_ordinal is not None
    assert agreement_all.alpha_nominal is not None
    restarts = mace.restart_labels
    assert restarts is not None
    best = mace.labels.reindex(restarts.index)
    per_restart = [
        float((restarts[c] == best).mean())
        for c in restarts.columns
        if not (restarts[c] == best).all()
    ] or [1.0]
    rng = np.random.default_rng(seed)
    runs = [
        authors_mace(votes, order, rng, n_restarts=n_restarts, n_iter=n_iter).reindex(gold.index)
        for _ in range(replicates)
    ]
    pairwise = [float((a == b).mean()) for i, a in enumerate(runs) for b in runs[i + 1 :]] or [
        float("nan")
    ]
    ours_vs_runs = [_agree(mace.labels, run) for run in runs] or [float("nan")]
    disagree = mace.labels.reindex(gold.index) != gold
    wrong = gold.index[disagree.to_numpy()]
    majority_ok = _has_majority(votes)
    gold_rows = ratings.gold[ratings.gold["dimension"] == dimension].set_index("task")
    gold_p = gold_rows.apply(lambda r: r[f"p_{r['label']}"], axis=1)
    report = DimensionReport(
        dimension=dimension,
        n_tasks=len(gold),
        n_votes=len(votes),
        n_workers=int(votes["worker"].nunique()),
        mace_agreement=_agree(mace.labels, gold),
        majority_agreement=_agree(majority.labels, gold),
        ds_agreement=_agree(ds.labels, gold),
        alpha_ordinal=agreement_all.alpha_ordinal,
        paper_alpha=CROWDRAG_PAPER_ALPHA[dimension][0],
        alpha_nominal=agreement_all.alpha_nominal,
        fleiss_kappa=agreement_all.fleiss_kappa,
        alpha_corrected_theirs=_corrected_alpha(votes, theirs, ratings.pairs, SCALE),
        alpha_corrected_ours=_corrected_alpha(votes, ours, ratings.pairs, SCALE),
        paper_alpha_corrected=CROWDRAG_PAPER_ALPHA[dimension][1],
        gold_from_their_competence=_agree(_posterior_from_spam(votes, theirs, order), gold),
        competence_correlation=float(np.corrcoef(ours.to_numpy(), theirs.to_numpy())[0, 1]),
        restart_agreement_median=float(np.median(per_restart)),
        restart_agreement_min=float(min(per_restart)),
        replicate_gold_agreement=tuple(_agree(run, gold) for run in runs),
        replicate_pairwise_agreement=float(np.median(pairwise)),
        replicate_ours_agreement=float(np.median(ours_vs_runs)),
        n_disagree=len(wrong),
        disagree_no_majority=int((~majority_ok.reindex(wrong)).sum()),
        disagree_gold_uncertain=int((gold_p.reindex(wrong) < 0.6).sum()),
        disagree_ours_uncertain=int((mace.confidence.reindex(wrong) < 0.6).sum()),
        log_likelihood=float(mace.log_likelihood or 0.0),
        seconds=round(time.perf_counter() - started, 1),
    )
    return report, mace


def reproduce_crowdrag(
    ratings: CrowdRagRatings,
    *,
    dimensions: Sequence[str] = CROWDRAG_DIMENSIONS,
    seed: int = 0,
    n_restarts: int = 20,
    n_iter: int = 100,
    replicates: int = 5,
    progress: bool = True,
) -> tuple[list[DimensionReport], dict[str, AggregationResult]]:
    """:func:`reproduce_dimension` for each dimension (a tqdm bar over dimensions)."""
    reports: list[DimensionReport] = []
    results: dict[str, AggregationResult] = {}
    bar = tqdm(dimensions, desc="dimensions", unit="dim", disable=not progress)
    for dimension in bar:
        bar.set_postfix_str(dimension)
        report, result = reproduce_dimension(
            ratings,
            dimension,
            seed=seed,
            n_restarts=n_restarts,
            n_iter=n_iter,
            replicates=replicates,
        )
        reports.append(report)
        results[dimension] = result
    return reports, results


def reproduction_markdown(reports: Sequence[DimensionReport]) -> str:
    """Two tables: agreement with the authors' gold, and α next to the paper's."""

    def pct(value: float) -> str:
        return "–" if np.isnan(value) else f"{value:.1%}"

    lines = [
        "| dimension | MACE = gold | majority = gold | DS = gold | their MACE, other "
        "starts = gold (min–max) | their MACE vs itself | ours vs their MACE | E-step with "
        "their competences = gold | restarts agree (median / min) | spam r | "
        "disagreements: no 3-of-5 majority / their p<0.6 / our p<0.6 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        runs = r.replicate_gold_agreement
        span = f"{pct(min(runs))}–{pct(max(runs))}" if runs else "–"
        lines.append(
            f"| {r.dimension} | {pct(r.mace_agreement)} | {pct(r.majority_agreement)} | "
            f"{pct(r.ds_agreement)} | {span} | {pct(r.replicate_pairwise_agreement)} | "
            f"{pct(r.replicate_ours_agreement)} | {pct(r.gold_from_their_competence)} | "
            f"{pct(r.restart_agreement_median)} / {pct(r.restart_agreement_min)} | "
            f"{r.competence_correlation:.2f} | {r.n_disagree}: {r.disagree_no_majority} / "
            f"{r.disagree_gold_uncertain} / {r.disagree_ours_uncertain} |"
        )
    lines += [
        "",
        "| dimension | α ordinal (ours) | α(C) paper | α(C*) their spam | α(C*) our spam | "
        "α(C*) paper | α nominal | Fleiss κ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        kappa = "–" if r.fleiss_kappa is None else f"{r.fleiss_kappa:.3f}"
        lines.append(
            f"| {r.dimension} | {r.alpha_ordinal:.3f} | {r.paper_alpha:.2f} | "
            f"{r.alpha_corrected_theirs:.3f} | {r.alpha_corrected_ours:.3f} | "
            f"{r.paper_alpha_corrected:.2f} | {r.alpha_nominal:.3f} | {kappa} |"
        )
    return "\n".join(lines) + "\n"


def report_json(reports: Sequence[DimensionReport]) -> list[dict[str, Any]]:
    return [asdict(r) for r in reports]
