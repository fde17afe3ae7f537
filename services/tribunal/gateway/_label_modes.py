"""Label modes, and which stages each one calls: the one definition.

``Gateway.Label`` (:class:`LabelPipeline`) decides by the mode; bulk labelling jobs
load only the stages of theirs (a judge-only job never loads the debate's models).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import cast

from ..core import InvalidArgumentError
from ..core.settings import LABEL_MODES
from ..v1 import gateway_pb2

__all__ = ["LABEL_MODE_STAGES", "LabelMode", "label_stages"]


class LabelMode(enum.StrEnum):
    """How ``Label`` decides (``gateway.label_mode``, ``LabelRequest.mode``, ``--mode``)."""

    CASCADE = "cascade"
    """The relevance judge decides outside its unsure band; the debate inside it."""
    DEBATE = "debate"
    """The debate on every item."""
    JUDGE = "judge"
    """The relevance judge alone, at its artifact's threshold."""

    @property
    def proto(self) -> gateway_pb2.LabelMode:
        """``LABEL_MODE_<NAME>`` of the proto."""
        return cast(gateway_pb2.LabelMode, gateway_pb2.LabelMode.Value(f"LABEL_MODE_{self.name}"))

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages ``Label`` calls in this mode."""
        return LABEL_MODE_STAGES[self]

    @classmethod
    def parse(cls, text: str, *, field: str = "mode") -> LabelMode:
        """``"cascade"`` → :attr:`CASCADE`; an unknown name is the caller's mistake."""
        try:
            return cls(text)
        except ValueError:
            raise InvalidArgumentError(
                f"mode {text!r} is not one of {', '.join(cls)}", field=field
            ) from None

    @classmethod
    def from_proto(cls, value: int) -> LabelMode:
        """The mode of a request's ``LABEL_MODE_*`` (not UNSPECIFIED)."""
        for mode in cls:
            if mode.proto == value:
                return mode
        raise InvalidArgumentError(f"mode {value} is not a LabelMode", field="mode")


LABEL_MODE_STAGES: Mapping[LabelMode, tuple[str, ...]] = {
    LabelMode.JUDGE: ("ensemble",),
    LabelMode.CASCADE: ("ensemble", "debate"),
    LabelMode.DEBATE: ("debate",),
}
"""Mode → the stages (registry names) ``Label`` calls in it."""
assert tuple(LabelMode) == LABEL_MODES


def label_stages(mode: LabelMode, band_to: str = "debate") -> tuple[str, ...]:
    """The stages ``Label`` calls in ``mode``; a cascade whose band goes to humans
    (``gateway.label_band_to``) never calls the debate."""
    if mode is LabelMode.CASCADE and band_to == "human":
        return ("ensemble",)
    return LABEL_MODE_STAGES[mode]
