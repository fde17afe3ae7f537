"""LLM engine parts that need no model: P(yes) arithmetic, JSON checks, prompts, settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import BaseModel, Field
from tribunal.core import ConfigError, InvalidArgumentError, NotFoundError, load_settings
from tribunal.core.llm import MalformedOutputError, Prompt, Usage, extract_json
from tribunal.core.llm._json import SchemaValidator
from tribunal.core.llm._types import YesNoBatch
from tribunal.core.llm._yesno import (
    YesNoTokens,
    p_yes_from_logits,
    p_yes_from_top_logprobs,
    yes_no_spellings,
)
from tribunal.prompts import PromptTemplate, get_prompt
from tribunal.prompts._template import list_prompts


def test_spellings_cover_case_and_leading_space() -> None:
    assert set(yes_no_spellings("yes")) == {"yes", "Yes", "YES", " yes", " Yes", " YES"}
    assert " No" in yes_no_spellings("no")


def test_p_yes_sums_every_variant_and_renormalises_over_yes_and_no() -> None:
    tokens = YesNoTokens(yes=(1, 2), no=(3,))
    logits = np.full(10, -50.0)
    logits[[1, 2, 3]] = [math.log(0.3), math.log(0.3), math.log(0.2)]
    logits[7] = math.log(0.2)  # some other token takes the rest of the mass
    p_yes, mass = p_yes_from_logits(logits, tokens)
    assert p_yes == pytest.approx(0.6 / 0.8)
    assert mass == pytest.approx(0.8, rel=1e-6)


def test_p_yes_survives_logits_far_from_zero() -> None:
    tokens = YesNoTokens(yes=(0,), no=(1,))
    p_yes, _ = p_yes_from_logits(np.array([-2000.0, -2003.0, 40.0]), tokens)
    assert p_yes == pytest.approx(1 / (1 + math.exp(-3)))


def test_yes_no_tokens_keep_only_single_token_spellings() -> None:
    vocabulary = {"yes": [5], "Yes": [6], " yes": [7, 8], "no": [9], "No": [10]}
    tokens = YesNoTokens.from_tokenizer(lambda text: vocabulary.get(text, [1, 2]))
    assert tokens == YesNoTokens(yes=(5, 6), no=(9, 10))


def test_top_logprobs_count_visible_variants_and_refuse_when_neither_is_there() -> None:
    p_yes, mass = p_yes_from_top_logprobs(
        [("Yes", math.log(0.6)), (" yes", math.log(0.1)), ("No", math.log(0.1)), ("Sure", -1.0)]
    )
    assert p_yes == pytest.approx(0.7 / 0.8)
    assert mass == pytest.approx(0.8)
    with pytest.raises(MalformedOutputError):
        p_yes_from_top_logprobs([("Maybe", -0.1), ("Perhaps", -3.0)])


def test_yes_no_batch_reads_as_a_sequence_of_floats() -> None:
    batch = YesNoBatch(p_yes=[0.9, 0.1], yes_no_mass=[1.0, 1.0], prompt_ids=[None, None])
    assert list(batch) == [0.9, 0.1]
    assert batch[1] == 0.1
    assert len(batch) == 2
    assert (Usage(1, 0, 2, 0.5, 1) + Usage(3, 1, 0, 0.5, 1)) == Usage(4, 1, 2, 1.0, 2)


def test_extract_json_finds_the_object_in_fences_and_chatter() -> None:
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure! Here it is: {"a": [1, 2]} Hope it helps.') == {"a": [1, 2]}
    assert extract_json('{broken {"b": true}') == {"b": True}
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("Paris.")


class Capital(BaseModel):
    country: str
    capital: str
    population_millions: float = Field(ge=0)


def test_pydantic_schema_validates_and_explains_what_is_wrong() -> None:
    validator: SchemaValidator[Capital] = SchemaValidator(Capital)
    value = validator.validate(
        '{"country": "France", "capital": "Paris", "population_millions": 2}'
    )
    assert value == Capital(country="France", capital="Paris", population_millions=2)
    with pytest.raises(ValueError, match="population_millions") as caught:
        validator.validate('{"country": "France", "capital": "Paris", "population_millions": -1}')
    assert "greater than or equal to 0" in str(caught.value)
    assert '"capital"' in validator.instruction()


def test_json_schema_mapping_validates_and_bad_schemas_are_refused() -> None:
    schema = {
        "type": "object",
        "properties": {"label": {"enum": ["relevant", "irrelevant"]}},
        "required": ["label"],
    }
    validator: SchemaValidator[dict[str, str]] = SchemaValidator(schema)
    assert validator.validate('{"label": "relevant"}') == {"label": "relevant"}
    with pytest.raises(ValueError, match="label"):
        validator.validate('{"label": "maybe"}')
    with pytest.raises(InvalidArgumentError):
        SchemaValidator({"type": "no-such-type"})


def test_registered_prompts_are_named_versioned_and_item_last() -> None:
    ids = {t.id for t in list_prompts()}
    assert {"relevance/yesno@1", "entailment/support@1", "matching/ral2m@1"} <= ids
    template = get_prompt("relevance")
    assert template is get_prompt("relevance/yesno@1")
    prompt = template.render(query="who wrote hamlet", passage="Hamlet is by Shakespeare.")
    assert prompt.prompt_id == "relevance/yesno@1"
    user = prompt.messages[-1].content
    # Instructions first, the item after them, the fixed question last.
    assert user.index(template.instructions) < user.index("who wrote hamlet")
    assert user.endswith(template.question)
    other = template.render(query="capital of peru", passage="Lima.")
    shared = other.messages[-1].content
    assert shared.startswith(template.instructions)


def test_the_ral2m_prompt_is_the_papers_text() -> None:
    template = get_prompt("matching")
    text = template.render(query="Q?", question="KQ?", answer="KA.").messages[-1].content
    assert text.startswith("You are a meticulous QA evaluation agent.")
    assert "User Query: Q?\nRetrieved Question: KQ?\nRetrieved Answer: KA." in text
    assert text.endswith("Output 'Yes' if the retrieved QA is a perfect match, otherwise 'No'.")


def test_prompt_lookup_and_fields_fail_clearly() -> None:
    with pytest.raises(NotFoundError):
        get_prompt("relevance", "no-such-variant")
    with pytest.raises(NotFoundError):
        get_prompt("relevance/yesno@99")
    with pytest.raises(InvalidArgumentError) as caught:
        get_prompt("entailment").render(claim="x")
    assert caught.value.field == "evidence"
    with pytest.raises(ValueError, match="truncatable"):
        PromptTemplate(role="r", name="n", version=1, instructions="i", item="{a}", truncatable="b")


def test_plain_strings_become_one_user_message() -> None:
    prompt = Prompt.user("Is it?", system="Be brief.")
    assert [m.role for m in prompt.messages] == ["system", "user"]
    assert prompt.as_dicts()[1] == {"role": "user", "content": "Is it?"}


def test_llm_settings_come_from_the_environment_and_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRIBUNAL_LLM__BATCH_SIZE", "4")
    monkeypatch.setenv("TRIBUNAL_LLM__PREFIX_CACHE", "false")
    settings = load_settings()
    assert settings.llm.batch_size == 4
    assert settings.llm.prefix_cache is False
    monkeypatch.setenv("TRIBUNAL_LLM__MAX_PROMPT_TOKENS", "3")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "llm.max_prompt_tokens"
