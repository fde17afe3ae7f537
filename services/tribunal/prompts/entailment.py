"""Entailment / support checker: does the evidence support the claim (or answer)?

``support`` is the default; ``fully-supported`` is the claim/evidence variant of the
judgment-quality sweep: it asks whether the claim is *fully* supported and
names partial support and topical overlap as No. Both put the evidence first (claims
checked against one abstract share it as prompt prefix).
"""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = ["ENTAILMENT_FULLY_SUPPORTED", "ENTAILMENT_SUPPORT"]

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

ENTAILMENT_FULLY_SUPPORTED = register(
    PromptTemplate(
        role="entailment",
        name="fully-supported",
        version=1,
        system="You are a meticulous scientific fact checker.",
        instructions=(
            "Read a scientific abstract (the evidence) and a claim. The claim is fully "
            "supported only if the evidence reports a finding that establishes the whole "
            "claim, including its direction (increase or decrease) and its population. If "
            "the evidence reports the opposite, only part of the claim, a related finding, "
            "or nothing about it, the claim is not fully supported."
        ),
        item="Evidence: {evidence}\nClaim: {claim}",
        question="Is the claim fully supported by the evidence? Answer Yes or No.",
        truncatable="evidence",
        description="claim/evidence 'is the claim fully supported' wording",
    )
)
