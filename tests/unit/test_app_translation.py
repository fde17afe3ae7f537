"""Each service's Serve deployment answers every RPC of its proto, and translates with
the gRPC servicer's own functions, so the two adapters cannot drift apart."""

from __future__ import annotations

import importlib

import pytest
from tribunal.deploy import SERVICES
from tribunal.entailment import EntailmentLabel, QuoteChecker
from tribunal.entailment._cascade import CheckStage, EntailmentVerdict
from tribunal.entailment.servicer import check_quotes, check_response
from tribunal.v1 import entailment_pb2


@pytest.mark.parametrize("name", list(SERVICES))
def test_every_deployment_serves_every_rpc_of_its_proto(name: str) -> None:
    spec = SERVICES[name]
    pb2 = importlib.import_module(f"tribunal.v1.{spec.proto}_pb2")
    rpcs = {method.name for method in pb2.DESCRIPTOR.services_by_name[spec.proto_service].methods}
    module = importlib.import_module(spec.app_builder.partition(":")[0])
    [deployment] = [getattr(module, n) for n in module.__all__ if n.endswith("Deployment")]
    served = {rpc for rpc in rpcs if callable(getattr(deployment.func_or_class, rpc, None))}
    assert served == rpcs


def _verdict(stage: CheckStage) -> EntailmentVerdict:
    return EntailmentVerdict(
        p_entail=0.9,
        p_contradict=None,
        label=EntailmentLabel.ENTAILED,
        decided_by=stage,
        supporting_chunk=None,
        quote=None,
        model="m",
        prompt_tokens=3,
    )


def test_strong_calls_are_counted_from_the_requests_own_verdicts() -> None:
    # One count for both adapters: the pairs the strong checker decided, so a Serve batch
    # that gathered several requests still reports each request's own.
    stages = [CheckStage.FAST, CheckStage.STRONG, CheckStage.QUOTE, CheckStage.STRONG]
    response = check_response([_verdict(stage) for stage in stages])
    assert response.strong_calls == 2
    assert response.usage.prompt_tokens == 12
    assert [r.decided_by for r in response.results] == [
        entailment_pb2.CHECK_STAGE_FAST,
        entailment_pb2.CHECK_STAGE_STRONG,
        entailment_pb2.CHECK_STAGE_QUOTE,
        entailment_pb2.CHECK_STAGE_STRONG,
    ]


def test_check_quotes_is_one_function_for_both_adapters() -> None:
    request = entailment_pb2.CheckQuotesRequest(
        quotes=[
            entailment_pb2.QuoteQuery(premise="Masks reduce spread.", quote="reduce spread"),
            entailment_pb2.QuoteQuery(premise="Masks reduce spread.", quote="cure colds"),
        ]
    )
    response = check_quotes(QuoteChecker(), request)
    assert [m.found for m in response.matches] == [True, False]
