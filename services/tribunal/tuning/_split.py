"""The tune's split of labelled traffic: what the matcher may learn from, what it may not.

A certificate is valid only on queries that no fitted or selected thing has seen.
``tribunal tune`` therefore cuts the traffic once, seeded and recorded in its
artifact, into

- a **fit** part: ``train`` queries teach the KB (and train the encoder, when it is
  fine-tuned). The matching head is fitted on them too, each with its own taught
  phrasing left out, so it sees the scores a query the KB was not taught gets —
  unless the encoder is fine-tuned: it would know those queries, so a ``head`` part
  is kept apart for the head (embedded by the trained encoder, so the head sees the
  scores new queries will get, not the scores of queries the encoder memorised);
- a **held-out** part: never trained on, never used to select anything. The
  tune reports its AUROC before and after there, and ``tribunal calibrate``
  certifies only on it (the head part may fit the calibrator: see
  :mod:`._certify`).

The split is by query (i.i.d. queries stay i.i.d.: the held-out part is a
random sample of the traffic, exchangeable with future traffic given the tuned
model), except that rows sharing an explicit ``group`` stay together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..confidence import LabelledQuery, query_digest
from ..core import InvalidArgumentError

__all__ = ["TuneSplit", "query_key", "split_for_tuning"]


def query_key(query: str) -> str:
    """A query's identity in a split: sha256 of its whitespace- and case-normalised text,
    so a calibration file cannot slip a fit query back in by spacing or capitals."""
    return query_digest(query)[:20]


@dataclass(frozen=True)
class TuneSplit:
    """Query indices of each part, disjoint and together every query."""

    train: tuple[int, ...]
    """The encoder trains on these."""
    head: tuple[int, ...]
    """The matching head is fitted on these (none: on ``train``, leaving each query's own
    phrasing out)."""
    heldout: tuple[int, ...]
    """Nothing is fitted or selected on these: the AUROC report, then calibration."""
    seed: int
    heldout_fraction: float
    head_fraction: float

    @property
    def fit(self) -> tuple[int, ...]:
        """Every query something was fitted on."""
        return tuple(sorted(self.train + self.head))

    def record(self, queries: Sequence[LabelledQuery]) -> dict[str, Any]:
        """What the artifact stores: the parameters, the sizes and each part's query keys."""
        return {
            "seed": self.seed,
            "heldout_fraction": self.heldout_fraction,
            "head_fraction": self.head_fraction,
            "unit": "query (rows with an explicit group stay together)",
            "sizes": {
                "train": len(self.train),
                "head": len(self.head),
                "heldout": len(self.heldout),
            },
            "fit_keys": sorted(query_key(queries[i].query) for i in self.fit),
            "head_keys": sorted(query_key(queries[i].query) for i in self.head),
            "heldout_keys": sorted(query_key(queries[i].query) for i in self.heldout),
        }


def _unit(query: LabelledQuery, index: int) -> str:
    # An explicit group keeps its rows together; otherwise each row is its own unit.
    return query.group if query.group.startswith("group:") else f"row:{index}"


def split_for_tuning(
    queries: Sequence[LabelledQuery], *, heldout_fraction: float, head_fraction: float, seed: int
) -> TuneSplit:
    """Seeded split (``numpy.random.default_rng(seed)`` over units, cut by query count).

    Identical query texts (after normalisation) always share a part, so the same
    question cannot be trained on and certified on. ``head_fraction`` 0: no head part.

    Raises:
        InvalidArgumentError: a fraction outside its range ((0, 1); the head's [0, 1)), or
            a part left empty.
    """
    if not 0.0 < heldout_fraction < 1.0:
        raise InvalidArgumentError(
            f"heldout_fraction must be in (0, 1), got {heldout_fraction}",
            field="heldout_fraction",
        )
    if not 0.0 <= head_fraction < 1.0:
        raise InvalidArgumentError(
            f"head_fraction must be in [0, 1), got {head_fraction}", field="head_fraction"
        )
    units: dict[str, list[int]] = {}
    by_text: dict[str, str] = {}
    for index, query in enumerate(queries):
        key = query_key(query.query)
        unit = by_text.setdefault(key, _unit(query, index))
        units.setdefault(unit, []).append(index)
    names = sorted(units)
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]

    def cut(pool: list[str], fraction: float) -> tuple[list[str], list[str]]:
        total = sum(len(units[u]) for u in pool)
        taken: list[str] = []
        count = 0
        for unit in pool:
            if count >= fraction * total:
                break
            taken.append(unit)
            count += len(units[unit])
        return taken, pool[len(taken) :]

    held, rest = cut(order, heldout_fraction)
    head, train = cut(rest, head_fraction)
    parts: Mapping[str, list[str]] = {"train": train, "head": head, "heldout": held}
    rows_of = {
        name: tuple(sorted(i for u in part for i in units[u])) for name, part in parts.items()
    }
    empty = [
        name for name, rows in rows_of.items() if not rows and (name != "head" or head_fraction)
    ]
    if empty:
        raise InvalidArgumentError(
            f"the split left no queries in {', '.join(empty)}; label more traffic",
            field="traffic",
        )
    return TuneSplit(
        rows_of["train"], rows_of["head"], rows_of["heldout"], seed, heldout_fraction, head_fraction
    )
