"""Every calibrator kind by name, and building an unfitted one."""

from __future__ import annotations

from ..core import InvalidArgumentError
from ..core.settings import CALIBRATOR_KINDS
from ._calibrators import (
    Calibrator,
    CalibratorKind,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
)
from ._monotone import PORTABLE_SIGNALS, MonotoneCalibrator

__all__ = ["CALIBRATORS", "make_calibrator"]

CALIBRATORS: dict[CalibratorKind, type[Calibrator]] = {
    "platt": PlattCalibrator,
    "isotonic": IsotonicCalibrator,
    "temperature": TemperatureCalibrator,
    "monotone": MonotoneCalibrator,
}
assert tuple(CALIBRATORS) == CALIBRATOR_KINDS


def make_calibrator(
    kind: str, *, score: str | None = None, signals: tuple[str, ...] | None = None
) -> Calibrator:
    """An unfitted calibrator of ``kind``.

    ``score`` is the column a single-score kind (isotonic, temperature) reads;
    ``signals`` the columns of the monotone one (default: ``PORTABLE_SIGNALS``).

    Raises:
        InvalidArgumentError: unknown kind, or a single-score kind without ``score``.
    """
    if kind == "platt":
        return PlattCalibrator()
    if kind == "monotone":
        return MonotoneCalibrator(signals=signals or PORTABLE_SIGNALS)
    if kind in ("isotonic", "temperature"):
        if not score:
            raise InvalidArgumentError(f"the {kind} calibrator needs a score signal", field="score")
        return (
            IsotonicCalibrator(score=score)
            if kind == "isotonic"
            else TemperatureCalibrator(score=score)
        )
    raise InvalidArgumentError(
        f"unknown calibrator {kind!r}; choose one of {', '.join(CALIBRATORS)}", field="calibrator"
    )
