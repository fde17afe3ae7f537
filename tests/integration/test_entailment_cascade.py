"""The cascade's routing and the NLI cross-encoder backend, end to end.

The NLI model is a tiny randomly initialised BERT classifier built here from the
real MiniLM tokenizer (no download); its classifier bias is set so that its
output, and hence the label-order mapping, is known.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from tribunal.core import (
    ConfigError,
    InvalidArgumentError,
    ResourceExhaustedError,
    Settings,
    model_path,
)
from tribunal.entailment._cascade import (
    CheckStage,
    EntailmentCascade,
    EntailmentLabel,
    PairToCheck,
)
from tribunal.entailment._checkers import LexicalOverlapChecker, NliCrossEncoderChecker

TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def build_tiny_nli(
    folder: Path, tokenizer_dir: Path, id2label: dict[int, str], bias: list[float]
) -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias))
    folder.mkdir(parents=True)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, folder / name)
    return folder


@pytest.fixture
def minilm_dir(tiny_settings: Settings) -> Path:
    return model_path(tiny_settings, "embedder")


@pytest.mark.models
def test_nli_backend_reads_label_order_from_the_config(tmp_path: Path, minilm_dir: Path) -> None:
    # Entailment is label 1 here, contradiction label 2: logits (0, 3, 1).
    folder = build_tiny_nli(
        tmp_path / "nli",
        minilm_dir,
        {0: "NEUTRAL", 1: "ENTAILMENT", 2: "CONTRADICTION"},
        [0.0, 3.0, 1.0],
    )
    checker = NliCrossEncoderChecker(str(folder))
    expected = torch.softmax(torch.tensor([0.0, 3.0, 1.0]), dim=0).tolist()
    [score] = checker.score([("The sky is blue.", "The sky has a colour.")])
    assert score.p_entail == pytest.approx(expected[1], abs=1e-5)
    assert score.p_contradict == pytest.approx(expected[2], abs=1e-5)
    assert score.prompt_tokens > 5


@pytest.mark.models
def test_nli_model_without_an_entailment_label_is_refused(tmp_path: Path, minilm_dir: Path) -> None:
    folder = build_tiny_nli(
        tmp_path / "bad", minilm_dir, {0: "POSITIVE", 1: "NEGATIVE"}, [0.0, 0.0]
    )
    with pytest.raises(ConfigError, match="no single entailment label"):
        NliCrossEncoderChecker(str(folder))


@pytest.mark.models
def test_cascade_sends_only_uncertain_pairs_to_the_strong_checker(
    tmp_path: Path, minilm_dir: Path
) -> None:
    strong = NliCrossEncoderChecker(
        str(
            build_tiny_nli(
                tmp_path / "strong",
                minilm_dir,
                {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
                [4.0, 0.0, 0.0],  # the strong model always says "contradiction"
            )
        )
    )
    cascade = EntailmentCascade(
        LexicalOverlapChecker(), strong, uncertain_band=(0.3, 0.7), chunk_size_chars=60
    )
    premise = "Masks reduce the spread of respiratory droplets. Hand washing removes the virus."
    pairs = [
        PairToCheck(premise, "Masks reduce droplets spread."),  # overlap 1.0: fast decides
        PairToCheck(premise, "Masks stop influenza in schools."),  # overlap 0.25: fast decides
        PairToCheck(premise, "Hand washing kills bacteria."),  # overlap 0.5: uncertain
        PairToCheck(premise, "Masks work.", quote="masks block all viruses completely"),
    ]
    verdicts = cascade.check(pairs)
    assert [v.decided_by for v in verdicts] == [
        CheckStage.FAST,
        CheckStage.FAST,
        CheckStage.STRONG,
        CheckStage.QUOTE,
    ]
    assert verdicts[0].label is EntailmentLabel.ENTAILED
    assert verdicts[0].supporting_chunk is not None
    assert verdicts[0].supporting_chunk.text == "Masks reduce the spread of respiratory droplets."
    assert verdicts[1].label is EntailmentLabel.NEUTRAL
    assert verdicts[2].label is EntailmentLabel.CONTRADICTED
    assert verdicts[2].model == str(tmp_path / "strong")
    assert verdicts[3].label is EntailmentLabel.QUOTE_NOT_FOUND
    assert cascade.strong_calls_ == 1
    # fast_only never calls the strong checker.
    assert cascade.check(pairs[2:3], fast_only=True)[0].decided_by is CheckStage.FAST
    assert cascade.strong_calls_ == 1


def test_long_premises_take_the_max_over_chunks() -> None:
    filler = " ".join(
        f"Sentence number {i} talks about something else entirely." for i in range(40)
    )
    premise = filler + " Vitamin C does not cure the common cold."
    cascade = EntailmentCascade(LexicalOverlapChecker(), chunk_size_chars=300)
    [verdict] = cascade.check([PairToCheck(premise, "Vitamin C cure common cold")])
    assert verdict.p_entail == 1.0
    assert verdict.supporting_chunk is not None
    assert verdict.supporting_chunk.index > 0
    chunk = verdict.supporting_chunk
    assert premise[chunk.start : chunk.start + len(chunk.text)] == chunk.text


def test_bad_input_names_the_field() -> None:
    cascade = EntailmentCascade(
        LexicalOverlapChecker(), max_pairs_per_request=2, max_premise_chars=50
    )
    with pytest.raises(InvalidArgumentError) as empty:
        cascade.check([PairToCheck("premise", "   ")])
    assert empty.value.field == "pairs[0].hypothesis"
    with pytest.raises(InvalidArgumentError) as long:
        cascade.check([PairToCheck("x" * 51, "h")])
    assert long.value.field == "pairs[0].premise"
    assert "limit is 50" in long.value.message
    with pytest.raises(ResourceExhaustedError, match="limit is 2"):
        cascade.check([PairToCheck("p", "h")] * 3)
    with pytest.raises(InvalidArgumentError, match="at least one pair"):
        cascade.check([])


def test_fast_decisions_use_the_band_edges_as_thresholds() -> None:
    # A small model's P(yes) is compressed: 1/3 is above this band, so the fast checker's
    # answer is "entailed" although 1/3 < entail_threshold.
    cascade = EntailmentCascade(
        LexicalOverlapChecker(), LexicalOverlapChecker(), uncertain_band=(0.1, 0.3)
    )
    premise = "Masks reduce the spread of respiratory droplets."
    above, below = cascade.check(
        [
            PairToCheck(premise, "Masks reduce influenza deaths in crowded schools."),  # 2/6
            PairToCheck(premise, "Vaccines prevent measles outbreaks in children."),  # 0/5
        ]
    )
    assert above.p_entail == pytest.approx(1 / 3)
    assert above.decided_by is CheckStage.FAST
    assert above.label is EntailmentLabel.ENTAILED
    assert below.label is EntailmentLabel.NEUTRAL
    # Without a strong stage the ordinary threshold applies.
    [one_stage] = EntailmentCascade(LexicalOverlapChecker(), uncertain_band=(0.1, 0.3)).check(
        [PairToCheck(premise, "Masks reduce influenza deaths in crowded schools.")]
    )
    assert one_stage.label is EntailmentLabel.NEUTRAL
