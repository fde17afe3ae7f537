"""What ``tribunal calibrate`` may certify a tuned matcher on: queries the tune never saw.

A calibrator certified on queries the encoder or its head was fitted on would see
the confident scores of memorised queries, not those of new ones, and its bound
would not hold. So, with a tuned matcher served:

- traffic that *is* the tune's file (same sha256) keeps the tune's held-out part, by
  the split recorded in the artifact, to certify on; every query the tune was fitted
  on is marked ``fit_only``: it may fit the calibrator and plan the risk-control
  test, never certify. The queries the tune taught (its train part) are also marked
  ``taught``: their signals are observed with their own phrasing left out, so they
  look like the new queries the calibrator will score (a taught query matched
  against itself would score as a perfect match). The certificate's validity needs
  only the certify queries to be unseen; what the calibrator is fitted on can only
  cost or win coverage, and fitting it on the fit part leaves every held-out query
  free to certify or be reported;
- any other traffic is refused if it holds a single fit query (compared by
  normalised text, :func:`~._split.query_key`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..confidence import Traffic
from ..core import FailedPreconditionError
from ..ensemble import TunedMatcher
from ._split import query_key

__all__ = ["certifiable_traffic"]


def certifiable_traffic(
    traffic: Traffic, tuned: TunedMatcher, collection: str
) -> tuple[Traffic, dict[str, Any]]:
    """The part of ``traffic`` a calibration of ``tuned`` may use, and what was done.

    Raises:
        FailedPreconditionError: the tune is another collection's, or the traffic holds
            queries the tune was fitted on (the message gives the count and the fix).
    """
    if tuned.collection != collection:
        raise FailedPreconditionError(
            f"the served tuned matcher {tuned.version} was tuned for collection "
            f"{tuned.collection!r}, not {collection!r}",
            field="collection",
        )
    split = tuned.split
    fit = set(split["fit_keys"])
    keys = [query_key(q.query) for q in traffic.queries]
    if traffic.sha256 == tuned.manifest["traffic"]["sha256"]:
        heldout = set(split["heldout_keys"])
        head = set(split.get("head_keys", ()))  # tunes before head keys were recorded: none
        # The train part, when it taught the KB and the encoder never trained on it (a
        # fine-tuned encoder knows its train queries: their scores would flatter).
        added = (tuned.manifest.get("teaching") or {}).get("phrasings_added", 0)
        taught = fit - head if added and tuned.weights_unchanged else set()
        kept = tuple(
            replace(q, fit_only=key not in heldout, taught=key in taught)
            for q, key in zip(traffic.queries, keys, strict=True)
            if key in heldout or key in head or key in taught
        )
        fit_only = sum(1 for q in kept if q.fit_only)
        note = {
            "tuned_matcher": tuned.version,
            "traffic": (
                "the tune's own file: its held-out part to certify, the queries it was "
                "fitted on to fit the calibrator only (taught ones with their own phrasing "
                "left out)"
                if fit_only
                else "the tune's own file: its held-out part only"
            ),
            "queries_dropped_as_fit": len(traffic) - len(kept),
            "fit_only": fit_only,
            "taught": sum(1 for q in kept if q.taught),
        }
        return replace(traffic, queries=kept), note
    overlap = sum(1 for key in keys if key in fit)
    if overlap:
        raise FailedPreconditionError(
            f"{overlap} of the {len(traffic)} queries in {traffic.source} were used to fit "
            f"the tuned matcher {tuned.version}: a certificate on them would not hold for new "
            "queries. Calibrate on the tune's own traffic file (its held-out part is used) or "
            "on traffic the tune never saw",
            field="traffic",
        )
    return traffic, {"tuned_matcher": tuned.version, "traffic": "not seen by the tune"}
