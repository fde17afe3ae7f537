"""Relevance judge: does a passage answer a search query? (TREC DL style, yes/no)."""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = ["RELEVANCE_YESNO"]

RELEVANCE_YESNO = register(
    PromptTemplate(
        role="relevance",
        name="yesno",
        version=1,
        system="You are a careful search quality rater.",
        instructions=(
            "You judge whether a passage answers a web search query. Say Yes only if the "
            "passage itself contains the answer, or information that directly answers what "
            "the searcher asked. Say No if the passage is off-topic, only shares some words "
            "with the query, or is on the topic without answering it."
        ),
        item="Query: {query}\nPassage: {passage}",
        question="Does the passage answer the query? Answer Yes or No.",
        truncatable="passage",
        description="single-judge relevance label read as P(yes); UMBRELA-like wording",
    ),
    default=True,
)
