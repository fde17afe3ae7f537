"""Relevance judge: does a passage answer a search query? (TREC DL style, yes/no).

``yesno`` is the default. The other variants were added for the judgment-quality
sweep (``tribunal-lab eval sweep --task relevance``); each keeps the layout
instructions-first, query and passage last, and asks one yes/no question, so P(yes)
is read the same way:

- ``plain``: the bare question, no rules (MODELS.md: the 1.5B model ranked best
  with a plain prompt, though it said yes to nearly everything);
- ``answers``: TREC-RAG / UMBRELA wording, "the passage contains the answer";
- ``strict``: lists what does not count (shared words, on topic without an answer,
  a different sense of the query's words);
- ``graded``: the TREC DL grade definitions first, then "is it grade 2 or 3?",
  which is exactly the positive class of the evaluation (grade ≥ 2).
"""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = [
    "RELEVANCE_ANSWERS",
    "RELEVANCE_GRADED",
    "RELEVANCE_PLAIN",
    "RELEVANCE_STRICT",
    "RELEVANCE_YESNO",
]

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

RELEVANCE_PLAIN = register(
    PromptTemplate(
        role="relevance",
        name="plain",
        version=1,
        system="You are a search quality rater.",
        instructions="Read a web search query and a passage.",
        item="Query: {query}\nPassage: {passage}",
        question="Is the passage relevant to the query? Answer Yes or No.",
        truncatable="passage",
        description="bare relevance question, no rules",
    )
)

RELEVANCE_ANSWERS = register(
    PromptTemplate(
        role="relevance",
        name="answers",
        version=1,
        system=(
            "You are a search quality rater evaluating passages for a question answering system."
        ),
        instructions=(
            "Given a query and a passage, decide whether the passage contains the answer to "
            "the query. Consider whether a person who asked the query would find what they "
            "were looking for in this passage. A passage that is merely on the same topic "
            "does not contain the answer."
        ),
        item="Query: {query}\nPassage: {passage}",
        question="Does the passage contain the answer to the query? Answer Yes or No.",
        truncatable="passage",
        description="TREC-RAG / UMBRELA wording: the passage contains the answer",
    )
)

RELEVANCE_STRICT = register(
    PromptTemplate(
        role="relevance",
        name="strict",
        version=1,
        system="You are a strict search quality rater.",
        instructions=(
            "You judge whether a passage answers a web search query. These do NOT count "
            "as answering: the passage shares words with the query but is about something "
            "else; the passage uses a query word in a different sense; the passage is on "
            "the topic but does not say what the searcher wants to know; the passage only "
            "says where the answer could be found. Only a passage that states the answer "
            "counts."
        ),
        item="Query: {query}\nPassage: {passage}",
        question="Does the passage state the answer to the query? Answer Yes or No.",
        truncatable="passage",
        description="answers-the-query, listing what does not count",
    )
)

RELEVANCE_GRADED = register(
    PromptTemplate(
        role="relevance",
        name="graded",
        version=1,
        system="You are a search quality rater.",
        instructions=(
            "Passages are graded for a query on this scale:\n"
            "3 = perfectly relevant: the passage is dedicated to the query and contains the "
            "exact answer.\n"
            "2 = highly relevant: the passage has an answer to the query, though it may be "
            "unclear or hidden among other information.\n"
            "1 = related: the passage is on the topic but does not answer the query.\n"
            "0 = irrelevant: the passage has nothing to do with the query."
        ),
        item="Query: {query}\nPassage: {passage}",
        question="Is this passage graded 2 or 3 (it answers the query)? Answer Yes or No.",
        truncatable="passage",
        description="TREC DL grade definitions first, then 'grade 2 or 3?' (the positive class)",
    )
)
