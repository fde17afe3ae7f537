"""``tribunal.v1.Signals`` to :class:`Signals`: the one conversion every reader of the
proto uses (the confidence service, the gateway's own check of its replies, the
``calibrate`` command), so a signal added to the proto reaches all of them at once.

It reads the protobuf message only (no grpc): :data:`SCALAR_FIELDS` lists the proto's
optional numbers, so a new scalar signal needs a row there and nothing here.
"""

from __future__ import annotations

from ..core import InvalidArgumentError
from ..v1 import confidence_pb2
from ._signals import SCALAR_FIELDS, DebateOutcome, Signals

__all__ = ["DEBATE_FROM_PROTO", "signals_from_proto"]

DEBATE_FROM_PROTO: dict[int, DebateOutcome] = {
    confidence_pb2.DEBATE_SIGNAL_AGREED_RELEVANT: DebateOutcome.AGREED_RELEVANT,
    confidence_pb2.DEBATE_SIGNAL_AGREED_IRRELEVANT: DebateOutcome.AGREED_IRRELEVANT,
    confidence_pb2.DEBATE_SIGNAL_DISAGREED: DebateOutcome.DISAGREED,
}
"""The proto's debate outcomes (UNSPECIFIED: the debate did not run)."""


def signals_from_proto(message: confidence_pb2.Signals) -> Signals:
    """Unset optional fields become ``None`` (missing), never their proto default 0.

    Raises:
        InvalidArgumentError: an unknown debate outcome, or a value out of its range
            (field ``signals.<name>``).
    """
    values: dict[str, object] = {
        name: getattr(message, name) for name in SCALAR_FIELDS if message.HasField(name)
    }
    if message.debate != confidence_pb2.DEBATE_SIGNAL_UNSPECIFIED:
        if message.debate not in DEBATE_FROM_PROTO:
            raise InvalidArgumentError(
                f"unknown debate signal {message.debate}", field="signals.debate"
            )
        values["debate"] = DEBATE_FROM_PROTO[message.debate]
    return Signals(
        judge_p_yes=dict(message.judge_p_yes),
        extra=dict(message.extra),
        **values,  # type: ignore[arg-type]
    )
