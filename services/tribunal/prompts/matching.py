"""Query ↔ KB entry matching judge: the RAL2M judgment prompt (paper appendix A.4)."""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = ["MATCHING_RAL2M", "MATCHING_RAL2M_AUGMENTED"]

# The paper's zero-shot prompt, word for word, split at the item: the instructions
# come first and are shared; the user query and the KB pair come last.
MATCHING_RAL2M = register(
    PromptTemplate(
        role="matching",
        name="ral2m",
        version=1,
        instructions=(
            "You are a meticulous QA evaluation agent. Your task is to determine if a "
            "retrieved question-answer pair fully resolves the user's query. Consider whether "
            "the QA pair addresses all parts of the query and maintains semantic equivalence. "
            "Think about how you could measure whether the response makes progress toward "
            "fully answering the user's question. Respond only with 'Yes' or 'No', no "
            "explanation."
        ),
        item="User Query: {query}\nRetrieved Question: {question}\nRetrieved Answer: {answer}",
        question="Output 'Yes' if the retrieved QA is a perfect match, otherwise 'No'.",
        truncatable="answer",
        description="RAL2M judge prompt (PromptWizard-tuned, zero-shot), appendix A.4",
    ),
    default=True,
)

# RAL2M's retrieval-augmented judge (its Table 4 "Augmented" row) adds the KB entry's
# supporting chunk; the paper prints no separate text for it. The instructions and the
# item up to the answer are the plain prompt's, word for word, so the two prompts of one
# item share their KV cache up to the chunk (the engine computes that prefix once).
MATCHING_RAL2M_AUGMENTED = register(
    PromptTemplate(
        role="matching",
        name="ral2m-augmented",
        version=1,
        instructions=MATCHING_RAL2M.instructions,
        item=MATCHING_RAL2M.item + "\nSupporting Document: {chunk}",
        question=MATCHING_RAL2M.question,
        truncatable="chunk",
        description="RAL2M judge prompt plus the KB entry's supporting chunk (augmented judge)",
    )
)
