"""The entailment service on real models through a real gRPC server.

The cascade runs the tiny profile's checkers on llama.cpp or transformers (0.5B fast,
1.5B strong).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from tribunal.core import Settings, load_settings
from tribunal.entailment import EntailmentLabel, PairToCheck
from tribunal.entailment._cascade import CheckStage
from tribunal.entailment._llm_checker import LlmSupportChecker
from tribunal.entailment.servicer import build_host
from tribunal.v1 import entailment_pb2, entailment_pb2_grpc

from ._llm_backend import LLM_BACKEND

PARIS = "Paris is the capital and largest city of France, with about two million residents."


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        server={"port": 0, "metrics_port": None},
        entailment={"uncertain_low": 0.0, "uncertain_high": 1.0},  # always reach stage 2
    )


@pytest.fixture(scope="module")
def stub(settings: Settings) -> Iterator[entailment_pb2_grpc.EntailmentServiceStub]:
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(600), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield entailment_pb2_grpc.EntailmentServiceStub(channel)
    host.stop(0)


@pytest.mark.models
def test_llm_checker_supports_a_stated_claim_and_not_a_false_one(settings: Settings) -> None:
    from tribunal.core.llm import shared_engine

    checker = LlmSupportChecker(shared_engine(settings, "llm_strong"))
    supported, unsupported = checker.score(
        [(PARIS, "The capital of France is Paris."), (PARIS, "Berlin is the capital of France.")]
    )
    assert supported.p_entail > 0.5 > unsupported.p_entail
    assert checker.prompt_id == "entailment/support@1"


@pytest.mark.models
def test_check_over_grpc_reports_stage_chunk_and_quote(
    stub: entailment_pb2_grpc.EntailmentServiceStub,
) -> None:
    response = stub.Check(
        entailment_pb2.CheckRequest(
            pairs=[
                entailment_pb2.EntailmentPair(
                    premise=PARIS,
                    hypothesis="Paris is France's capital.",
                    quote="capital and largest city of France",
                ),
                entailment_pb2.EntailmentPair(
                    premise=PARIS, hypothesis="Paris is in Spain.", quote="Paris is in Spain"
                ),
            ]
        ),
        timeout=300,
    )
    supported, missing_quote = response.results
    assert supported.decided_by == entailment_pb2.CHECK_STAGE_STRONG
    assert supported.label == entailment_pb2.ENTAILMENT_LABEL_ENTAILED
    assert supported.quote.found
    assert supported.quote.start == PARIS.index("capital")
    assert supported.supporting_chunk.text == PARIS
    assert supported.model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert missing_quote.label == entailment_pb2.ENTAILMENT_LABEL_QUOTE_NOT_FOUND
    assert missing_quote.decided_by == entailment_pb2.CHECK_STAGE_QUOTE
    assert response.strong_calls == 1
    assert response.usage.prompt_tokens > 0


@pytest.mark.models
@pytest.mark.parametrize(
    ("pairs", "code", "fragment"),
    [
        (
            [entailment_pb2.EntailmentPair(premise="", hypothesis="h")],
            "INVALID_ARGUMENT",
            "pairs[0].premise",
        ),
        (
            [entailment_pb2.EntailmentPair(premise="p", hypothesis=" ")],
            "INVALID_ARGUMENT",
            "hypothesis is empty",
        ),
        (
            [entailment_pb2.EntailmentPair(premise="p" * 20_001, hypothesis="h")],
            "INVALID_ARGUMENT",
            "limit is 20000",
        ),
        (
            [entailment_pb2.EntailmentPair(premise="p", hypothesis="h")] * 257,
            "RESOURCE_EXHAUSTED",
            "limit is 256",
        ),
        ([], "INVALID_ARGUMENT", "at least one pair"),
    ],
)
def test_bad_input_gets_a_clear_status(
    stub: entailment_pb2_grpc.EntailmentServiceStub,
    pairs: list[entailment_pb2.EntailmentPair],
    code: str,
    fragment: str,
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Check(entailment_pb2.CheckRequest(pairs=pairs), timeout=60)
    assert caught.value.code().name == code
    assert fragment in caught.value.details()


@pytest.mark.models
def test_check_quotes_needs_no_model(stub: entailment_pb2_grpc.EntailmentServiceStub) -> None:
    response = stub.CheckQuotes(
        entailment_pb2.CheckQuotesRequest(
            quotes=[
                entailment_pb2.QuoteQuery(premise=PARIS, quote="LARGEST city of France"),
                entailment_pb2.QuoteQuery(premise=PARIS, quote="the smallest village in Spain"),
            ]
        ),
        timeout=30,
    )
    assert [m.found for m in response.matches] == [True, False]
    assert PARIS[response.matches[0].start : response.matches[0].end] == "largest city of France"


def test_domain_enums_cover_the_proto() -> None:
    from tribunal.entailment.servicer import _LABELS, _STAGES

    assert set(_LABELS) == set(EntailmentLabel)
    assert set(_STAGES) == set(CheckStage)
    assert PairToCheck("p", "h").quote == ""
