"""Entailment / support checker: does the evidence support the claim (or answer)?"""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = ["ENTAILMENT_SUPPORT"]

ENTAILMENT_SUPPORT = register(
    PromptTemplate(
        role="entailment",
        name="support",
        version=1,
        system="You are a meticulous fact checker.",
        instructions=(
            "You check whether a piece of evidence supports a claim. Answer Yes only if the "
            "evidence states the claim or directly implies that it is true. Answer No if the "
            "evidence contradicts the claim, is about something else, or does not say enough "
            "to decide."
        ),
        # Evidence before the claim: claims checked against the same evidence share
        # the whole evidence as prompt prefix.
        item="Evidence: {evidence}\nClaim: {claim}",
        question="Does the evidence support the claim? Answer Yes or No.",
        truncatable="evidence",
        description="support checker (SUPPORT vs CONTRADICT / NOT ENOUGH INFO) read as P(yes)",
    ),
    default=True,
)
