"""Prompt templates: one module per role, each template named and versioned.

Results record the ``role/name@version`` id of the template that produced them.
Templates are laid out instructions-first, item-last, so that the LLM engine
reuses the KV cache of everything before the item, and state their truncation
policy (:class:`PromptTemplate`).

    from tribunal.prompts import get_prompt
    template = get_prompt("relevance")                # default variant, latest version
    prompt = template.render(engine, query=q, passage=p)  # cut to fit the engine
    engine.p_yes([prompt])
"""

from . import debate, entailment, matching, relevance
from ._template import PromptTemplate, get_prompt, register

__all__ = [
    "PromptTemplate",
    "debate",
    "entailment",
    "get_prompt",
    "matching",
    "register",
    "relevance",
]
