"""Human votes → labels: majority vote, MACE or Dawid–Skene, with agreement and competence.

Input is one vote per row: ``task``, ``worker``, ``label`` (the review UI exports this
format). :func:`aggregate` returns an :class:`AggregationResult`: a label per task, the
per-task posterior (vote shares for majority), per-worker competence, Fleiss' κ and
Krippendorff's α (nominal, plus ordinal when the label order is a graded scale).

Nothing here drops tasks or votes: the review of CrowdRAG-25 (papers/crowdrag25-review.md)
shows how deleting items by the vote that also defines their label inflates agreement.

Libraries, and why:

- crowd-kit (``MajorityVote``, ``MACE``, ``DawidSkene``) does the aggregation. Its
  ``MACE`` (1.4.2) has two defects this module works around instead of re-implementing
  the model: (1) every restart draws its initial parameters from the same
  ``random_state``, so ``n_restarts`` repeats one run; we run single-restart fits with
  seeds ``seed, seed+1, …`` and keep the one with the highest marginal likelihood, as
  MACE's restarts are meant to. (2) Its E-step matches per-worker counts (grouped, so
  sorted by worker and label) to parameters indexed by order of first appearance; when
  the two orders differ, workers get each other's parameters. We hand it integer codes
  whose order of appearance is their sorted order, so both orders coincide (the
  row-order test in tests/unit/test_aggregate.py fails without this).
- ``krippendorff`` computes α: crowd-kit's ``alpha_krippendorff`` is nominal only (an
  NLTK distance); ordinal α needs the rank-based distance of Krippendorff (2011), which
  this package implements. We use it for nominal α too, so both come from one place.
- statsmodels' ``fleiss_kappa``: crowd-kit has no Fleiss' κ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import numpy as np
import pandas as pd
from tqdm import tqdm

from tribunal.core import InvalidArgumentError, jsonl_rows

__all__ = [
    "AggregationResult",
    "Agreement",
    "LabelAggregator",
    "Method",
    "aggregate",
    "agreement",
    "read_votes",
]

Method = Literal["majority", "mace", "ds"]
METHODS: tuple[str, ...] = get_args(Method)
_COLUMNS = ("task", "worker", "label")


@dataclass(frozen=True)
class Agreement:
    """Inter-annotator agreement of one vote table (every vote, no task dropped)."""

    fleiss_kappa: float | None
    """Fleiss' κ; None when tasks have different numbers of votes (κ assumes a fixed
    number of raters per task; α does not)."""
    alpha_nominal: float | None
    """Krippendorff's α with the nominal (same/different) distance; None (like κ and
    ordinal α) when no task has two votes."""
    alpha_ordinal: float | None
    """Krippendorff's α with the ordinal distance over the label order; None when the
    labels are not declared ordinal."""
    n_pairable_tasks: int
    """Tasks with at least two votes (the only ones α and κ can use)."""


@dataclass(frozen=True)
class AggregationResult:
    """Labels, posteriors, competences and agreement of one aggregation run."""

    method: str
    labels: pd.Series
    """Final label per task (index ``task``)."""
    probabilities: pd.DataFrame
    """Per task (rows) the probability of each label (columns, in label order): the
    posterior for MACE and Dawid–Skene, vote shares for majority."""
    confidence: pd.Series
    """Probability of the chosen label per task."""
    tied: pd.Series
    """True where the top two labels have equal vote counts (majority) or equal
    posteriors; the label then is the earliest in the label order."""
    competence: pd.Series
    """Per worker: MACE's probability of not spamming, Dawid–Skene's expected accuracy
    (prior-weighted diagonal of the confusion matrix), or for majority the share of the
    worker's votes that equal the majority label."""
    agreement: Agreement
    label_order: tuple[str, ...]
    hyperparameters: dict[str, Any]
    log_likelihood: float | None = None
    """MACE: log marginal likelihood of the kept restart."""
    restart_log_likelihoods: tuple[float, ...] = ()
    restart_labels: pd.DataFrame | None = None
    """MACE: each restart's labels (columns = restart seed), to show how much restarts
    disagree with each other."""

    @property
    def n_tasks(self) -> int:
        return len(self.labels)

    @property
    def n_workers(self) -> int:
        return len(self.competence)

    def summary(self) -> dict[str, Any]:
        """Counts, agreement and hyperparameters (JSON-serialisable)."""
        counts = self.labels.value_counts()
        return {
            "method": self.method,
            "n_tasks": self.n_tasks,
            "n_workers": self.n_workers,
            "label_counts": {str(k): int(counts.get(k, 0)) for k in self.label_order},
            "n_tied": int(self.tied.sum()),
            "mean_confidence": round(float(self.confidence.mean()), 4),
            "agreement": dataclasses.asdict(self.agreement),
            "hyperparameters": self.hyperparameters,
            "log_likelihood": self.log_likelihood,
        }

    def task_records(self) -> list[dict[str, Any]]:
        """One JSON-ready row per task: label, confidence, tie flag, probabilities."""
        probs = self.probabilities.round(6)
        return [
            {
                "task": str(task),
                "label": str(self.labels[task]),
                "confidence": round(float(self.confidence[task]), 6),
                "tied": bool(self.tied[task]),
                "probabilities": {str(k): float(probs.at[task, k]) for k in probs.columns},
            }
            for task in self.labels.index
        ]


@dataclass
class LabelAggregator:
    """Aggregates one vote table; hyperparameters are attributes, fitted state ends in ``_``.

    MACE defaults are those of the CrowdRAG-25 authors' ratings script
    (``MACE(n_iter=100, n_restarts=20)`` with Beta(0.5, 0.5) on competence and a
    Dirichlet(10) on each worker's spamming strategy; crowd-kit's ``method="vb"`` has the
    same priors). Their restarts are unseeded (``np.random.random``), so their exact run
    cannot be replayed: we fix ``seed`` instead and report how much restarts disagree.
    """

    method: Method = "mace"
    """``majority``, ``mace`` (Hovy et al. 2013) or ``ds`` (Dawid & Skene 1979)."""
    labels: tuple[str, ...] | None = None
    """The label set in order; None: the sorted labels seen. Ties go to the earliest
    label, and ordinal α uses this order."""
    ordinal: bool = False
    """Whether ``labels`` is a graded scale (then ordinal α is reported too)."""
    seed: int = 0
    """MACE: restart ``r`` initialises with ``random_state = seed + r``."""
    n_restarts: int = 20
    """MACE: random restarts; the one with the highest marginal likelihood is kept."""
    n_iter: int = 100
    """MACE: EM iterations per restart; Dawid–Skene: the iteration cap."""
    mace_method: Literal["vb", "em"] = "vb"
    """MACE M-step: variational Bayes with the priors below (``vb``) or plain EM."""
    alpha: float = 0.5
    """MACE: Beta prior on each worker's spamming probability (first parameter)."""
    beta: float = 0.5
    """MACE: Beta prior on each worker's knowing probability (second parameter)."""
    ds_tol: float = 1e-5
    """Dawid–Skene: stop when the log-likelihood gains less than this."""
    progress: bool = False
    """Show a tqdm bar over MACE restarts."""

    labels_: pd.Series = field(init=False, repr=False)
    probas_: pd.DataFrame = field(init=False, repr=False)
    competence_: pd.Series = field(init=False, repr=False)
    tied_: pd.Series = field(init=False, repr=False)
    log_likelihood_: float | None = field(init=False, repr=False, default=None)
    restart_log_likelihoods_: tuple[float, ...] = field(init=False, repr=False, default=())
    restart_labels_: pd.DataFrame | None = field(init=False, repr=False, default=None)
    label_order_: tuple[str, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidArgumentError(
                f"unknown aggregation method {self.method!r}; use one of {', '.join(METHODS)}"
            )
        if self.n_restarts < 1 or self.n_iter < 1:
            raise InvalidArgumentError("n_restarts and n_iter must be at least 1")

    def hyperparameters(self) -> dict[str, Any]:
        common: dict[str, Any] = {"labels": list(self.label_order_), "ordinal": self.ordinal}
        if self.method == "mace":
            return common | {
                "seed": self.seed,
                "n_restarts": self.n_restarts,
                "n_iter": self.n_iter,
                "mace_method": self.mace_method,
                "alpha": self.alpha,
                "beta": self.beta,
                "strategy_prior": 10.0,
            }
        if self.method == "ds":
            return common | {"n_iter": self.n_iter, "tol": self.ds_tol}
        return common | {"tie_break": "earliest label in order"}

    def fit(self, votes: pd.DataFrame) -> LabelAggregator:
        votes = _validate(votes, self.labels)
        self.label_order_ = self.labels or tuple(sorted(votes["label"].unique()))
        if self.method == "majority":
            self._fit_majority(votes)
        elif self.method == "ds":
            self._fit_ds(votes)
        else:
            self._fit_mace(votes)
        return self

    def result(self, votes: pd.DataFrame) -> AggregationResult:
        """The fitted state as an :class:`AggregationResult` (``votes`` as given to fit)."""
        votes = _validate(votes, self.labels)
        probs = self.probas_
        return AggregationResult(
            method=self.method,
            labels=self.labels_,
            probabilities=probs,
            confidence=pd.Series(
                probs.to_numpy().max(axis=1), index=probs.index, name="confidence"
            ),
            tied=self.tied_,
            competence=self.competence_,
            agreement=agreement(votes, self.label_order_, ordinal=self.ordinal),
            label_order=self.label_order_,
            hyperparameters=self.hyperparameters(),
            log_likelihood=self.log_likelihood_,
            restart_log_likelihoods=self.restart_log_likelihoods_,
            restart_labels=self.restart_labels_,
        )

    # -- methods -------------------------------------------------------------------------

    def _set_labels(self, probs: pd.DataFrame, scores: pd.DataFrame) -> None:
        """Labels = argmax of ``scores`` (columns in label order; first maximum wins)."""
        order = list(self.label_order_)
        probs = probs.reindex(columns=order, fill_value=0.0).astype(float)
        values = scores.reindex(index=probs.index, columns=order, fill_value=0.0).to_numpy()
        top = values.argmax(axis=1)
        ranked = np.sort(values, axis=1)
        tied = np.isclose(ranked[:, -1], ranked[:, -2]) if values.shape[1] > 1 else top < 0
        probs.index.name = "task"
        self.probas_ = probs
        self.labels_ = pd.Series(np.asarray(order, dtype=object)[top], index=probs.index)
        self.labels_.name = "label"
        self.tied_ = pd.Series(tied, index=probs.index, name="tied")

    def _fit_majority(self, votes: pd.DataFrame) -> None:
        from crowdkit.aggregation import MajorityVote
        from crowdkit.metrics.workers import accuracy_on_aggregates

        with _quiet_crowdkit():
            model = MajorityVote().fit(votes)
            # Vote shares decide, with ties to the earliest label in order: crowd-kit's
            # idxmax would break them by column order, which depends on the labels seen.
            self._set_labels(model.probas_, model.probas_)
            accuracy = accuracy_on_aggregates(votes, aggregates=self.labels_, by="worker")
        self.competence_ = _named(accuracy, "competence")

    def _fit_ds(self, votes: pd.DataFrame) -> None:
        from crowdkit.aggregation import DawidSkene

        with _quiet_crowdkit():
            model = DawidSkene(n_iter=self.n_iter, tol=self.ds_tol).fit(votes)
        self._set_labels(model.probas_, model.probas_)
        errors = model.errors_  # index (worker, given label), columns: true label
        priors = model.priors_
        assert errors is not None
        assert priors is not None
        competence = {}
        for worker, matrix in errors.groupby(level=0, sort=True):
            confusion = matrix.droplevel(0)
            # P(answer = c | truth = c) weighted by the prior of c: expected accuracy.
            competence[worker] = float(
                sum(
                    priors[c] * confusion.at[c, c]
                    for c in priors.index
                    if c in confusion.index and c in confusion.columns
                )
            )
        self.competence_ = _named(competence, "competence")

    def _fit_mace(self, votes: pd.DataFrame) -> None:
        from crowdkit.aggregation import MACE

        codes = _MaceCodes(votes)
        best: tuple[float, Any] | None = None
        lls: list[float] = []
        restart_labels: dict[int, np.ndarray] = {}
        seeds = range(self.seed, self.seed + self.n_restarts)
        for seed in tqdm(seeds, desc="MACE restarts", unit="restart", disable=not self.progress):
            with _quiet_crowdkit():
                model = MACE(
                    n_restarts=1,
                    n_iter=self.n_iter,
                    method=self.mace_method,
                    alpha=self.alpha,
                    beta=self.beta,
                    random_state=seed,
                ).fit(codes.frame)
            ll = codes.log_likelihood(model.spamming_, model.thetas_)
            lls.append(ll)
            restart_labels[seed] = codes.labels(model.probas_)
            if best is None or ll > best[0]:  # ties keep the earlier seed
                best = (ll, model)
        assert best is not None
        ll, model = best
        probs = codes.probabilities(model.probas_)
        self._set_labels(probs, probs)
        spamming = np.asarray(model.spamming_, dtype=float)
        # VB leaves (spam, know) as exp-digamma weights that do not sum to one.
        competence = spamming[:, 1] / spamming.sum(axis=1)
        self.competence_ = pd.Series(competence, index=codes.workers, name="competence")
        self.competence_.index.name = "worker"
        self.log_likelihood_ = ll
        self.restart_log_likelihoods_ = tuple(lls)
        self.restart_labels_ = pd.DataFrame(restart_labels, index=codes.tasks)


class _MaceCodes:
    """Integer codes for crowd-kit's MACE whose first-appearance order is sorted order."""

    def __init__(self, votes: pd.DataFrame) -> None:
        worker_codes, self.workers = pd.factorize(votes["worker"], sort=True)
        task_codes, self.tasks = pd.factorize(votes["task"], sort=True)
        frame = pd.DataFrame(
            {"task": task_codes, "worker": worker_codes, "label": votes["label"].to_numpy()}
        )
        frame = frame.sort_values(["worker", "task"], kind="stable").reset_index(drop=True)
        # Label codes by first appearance in the worker-sorted frame: then appearance
        # order, sorted order and code order agree for workers and labels alike.
        label_codes, self.label_names = pd.factorize(frame["label"])
        frame["label"] = label_codes
        self.frame = frame
        self._t = frame["task"].to_numpy()
        self._w = frame["worker"].to_numpy()
        self._a = frame["label"].to_numpy()

    def log_likelihood(self, spamming: Any, thetas: Any) -> float:
        """Σ_tasks log Σ_t (1/K) Π_votes (spam·θ[a] + know·[a = t]) — MACE's objective."""
        spam = np.asarray(spamming, dtype=float)
        theta = np.asarray(thetas, dtype=float)
        k = len(self.label_names)
        per_vote = spam[self._w, 0] * theta[self._w, self._a]
        factors = per_vote[:, None] + spam[self._w, 1][:, None] * (
            self._a[:, None] == np.arange(k)[None, :]
        )
        logs = np.zeros((len(self.tasks), k))
        np.add.at(logs, self._t, np.log(np.maximum(factors, 1e-300)))
        logs -= math.log(k)
        top = logs.max(axis=1, keepdims=True)
        return float((top[:, 0] + np.log(np.exp(logs - top).sum(axis=1))).sum())

    def probabilities(self, probas: pd.DataFrame) -> pd.DataFrame:
        probs = probas.reindex(index=range(len(self.tasks)))
        probs.columns = [self.label_names[int(c)] for c in probs.columns]
        probs.index = self.tasks
        return probs

    def labels(self, probas: pd.DataFrame) -> np.ndarray:
        probs = self.probabilities(probas)
        return cast(np.ndarray, probs.columns.to_numpy()[probs.to_numpy().argmax(axis=1)])


@contextlib.contextmanager
def _quiet_crowdkit() -> Iterator[None]:
    """crowd-kit 1.4.2 calls pandas APIs that pandas 3 deprecates (``inplace=``); those
    warnings are about crowd-kit's code, not ours, and would bury our own."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"crowdkit\.")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"crowdkit\.")
        yield


def _named(series: Any, name: str) -> pd.Series:
    out = pd.Series(series, name=name)
    out.index.name = "worker"
    return out


def _validate(votes: pd.DataFrame, labels: Sequence[str] | None) -> pd.DataFrame:
    missing = [c for c in _COLUMNS if c not in votes.columns]
    if missing:
        raise InvalidArgumentError(
            f"votes need columns task, worker, label; missing: {', '.join(missing)}"
        )
    if votes.empty:
        raise InvalidArgumentError("no votes to aggregate")
    votes = votes.loc[:, list(_COLUMNS)].astype(str).reset_index(drop=True)
    duplicated = votes.duplicated(["task", "worker"])
    if duplicated.any():
        first = votes[duplicated].iloc[0]
        raise InvalidArgumentError(
            f"worker {first['worker']!r} voted more than once on task {first['task']!r} "
            f"({int(duplicated.sum())} repeated votes); keep one vote per worker and task"
        )
    if labels is not None:
        unknown = sorted(set(votes["label"]) - set(labels))
        if unknown:
            raise InvalidArgumentError(
                f"labels {unknown} are not in the declared label set {list(labels)}"
            )
    return votes


def agreement(
    votes: pd.DataFrame, labels: Sequence[str] | None = None, *, ordinal: bool = False
) -> Agreement:
    """Fleiss' κ and Krippendorff's α (nominal; ordinal over ``labels`` when ``ordinal``)."""
    import krippendorff
    from statsmodels.stats.inter_rater import fleiss_kappa

    votes = _validate(votes, labels)
    order = list(labels) if labels is not None else sorted(votes["label"].unique())
    counts = pd.crosstab(votes["task"], votes["label"]).reindex(columns=order, fill_value=0)
    table = counts.to_numpy(dtype=float)
    per_task = table.sum(axis=1)
    pairable = table[per_task >= 2]
    if len(pairable) == 0:
        return Agreement(None, None, None, 0)
    kappa: float | None = None
    if (per_task == per_task[0]).all() and per_task[0] >= 2:
        kappa = float(fleiss_kappa(table, method="fleiss"))
    nominal = float(krippendorff.alpha(value_counts=pairable, level_of_measurement="nominal"))
    ordinal_alpha = (
        float(krippendorff.alpha(value_counts=pairable, level_of_measurement="ordinal"))
        if ordinal
        else None
    )
    return Agreement(
        fleiss_kappa=_finite(kappa),
        alpha_nominal=nominal,
        alpha_ordinal=_finite(ordinal_alpha),
        n_pairable_tasks=len(pairable),
    )


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def aggregate(
    votes: pd.DataFrame,
    method: Method = "mace",
    seed: int = 0,
    *,
    labels: Sequence[str] | None = None,
    ordinal: bool = False,
    **hyperparameters: Any,
) -> AggregationResult:
    """Aggregate ``votes`` (columns task, worker, label) with ``method``.

    ``hyperparameters`` are :class:`LabelAggregator` attributes (``n_restarts``,
    ``n_iter``, ``alpha``, ``beta``, ``mace_method``, ``ds_tol``, ``progress``).
    """
    unknown = sorted(set(hyperparameters) - {f.name for f in dataclasses.fields(LabelAggregator)})
    if unknown or any(name.endswith("_") for name in hyperparameters):
        raise InvalidArgumentError(f"unknown aggregation settings: {unknown}")
    aggregator = LabelAggregator(
        method=method,
        labels=tuple(labels) if labels is not None else None,
        ordinal=ordinal,
        seed=seed,
        **hyperparameters,
    )
    return aggregator.fit(votes).result(votes)


def read_votes(path: Any) -> pd.DataFrame:
    """Votes from a JSONL file of ``{"task", "worker", "label"}`` objects (extra keys ignored)."""
    rows = []
    for row in jsonl_rows(path, field="votes"):
        if any(row.value.get(c) is None for c in _COLUMNS):
            raise InvalidArgumentError(f"{row.where}: each line needs task, worker and label")
        rows.append({c: str(row.value[c]) for c in _COLUMNS})
    if not rows:
        raise InvalidArgumentError(f"{path}: no votes")
    return pd.DataFrame(rows, columns=list(_COLUMNS))
