"""Every string, bytes and repeated field of every request has a size limit.

The walk starts at the input type of every RPC of every ``tribunal.v1`` service and goes
through every message field (map entries included), so a field added to a proto without
a row in ``REQUEST_LIMITS`` fails here.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import tribunal.v1
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from tribunal.core import InvalidArgumentError, ResourceExhaustedError, load_settings
from tribunal.core.server import RequestLimits
from tribunal.core.server._limits import REQUEST_LIMITS
from tribunal.v1 import common_pb2, confidence_pb2, entailment_pb2, gateway_pb2, retrieval_pb2


def _request_messages() -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}

    def visit(message: Descriptor) -> None:
        if message.full_name in found:
            return
        found[message.full_name] = message
        for field in message.fields:
            if field.message_type is not None:
                visit(field.message_type)

    for module_info in pkgutil.iter_modules(tribunal.v1.__path__):
        if not module_info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"tribunal.v1.{module_info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                visit(method.input_type)
    return found


REQUESTS = _request_messages()


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def _needed_rows(message: Descriptor) -> set[str]:
    rows = set()
    for field in message.fields:
        text = field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)
        if _repeated(field):
            rows.add(field.name)
            if text:
                rows.add(f"{field.name}[]")
        elif text:
            rows.add(field.name)
    return rows


def test_the_walk_reaches_every_service() -> None:
    # One request type of each service, and the nested messages, are in the walk.
    for name in (
        "tribunal.v1.UpsertRequest",
        "tribunal.v1.KbEntry.MetadataEntry",
        "tribunal.v1.Chunk",
        "tribunal.v1.CheckQuotesRequest",
        "tribunal.v1.JudgeRelevanceRequest",
        "tribunal.v1.Signals.ExtraEntry",
        "tribunal.v1.BatchAssessRequest",
        "tribunal.v1.BatchLabelRequest",
    ):
        assert name in REQUESTS, name


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_text_and_repeated_field_has_a_limit(name: str) -> None:
    needed = _needed_rows(REQUESTS[name])
    missing = needed - set(REQUEST_LIMITS.get(name, {}))
    assert not missing, f"{name}: no size limit for {sorted(missing)} in REQUEST_LIMITS"


def test_every_row_names_a_field_and_an_integer_setting() -> None:
    settings = load_settings()
    limits = RequestLimits.from_settings(settings)
    for message, fields in REQUEST_LIMITS.items():
        assert message in REQUESTS, f"{message} is not a request message"
        names = {f.name for f in REQUESTS[message].fields}
        for row, setting in fields.items():
            assert row.removesuffix("[]") in names, f"{message}.{row} is not a field"
            bound = limits.limit(message, row)
            assert bound is not None
            assert bound[0] == setting
            assert bound[1] >= 1
            assert setting.split(".")[-1].startswith("max_"), setting


def test_limits_name_the_field_and_the_setting() -> None:
    limits = RequestLimits.from_settings(
        load_settings(retrieval={"max_chunks_per_item": 2}, server={"max_id_chars": 8})
    )
    entry = common_pb2.KbEntry(id="e", chunks=[common_pb2.Chunk(id="c", text="t")] * 3)
    with pytest.raises(InvalidArgumentError, match="the limit is 2") as many:
        limits.check(retrieval_pb2.UpsertRequest(collection="faq", entries=[entry]))
    assert many.value.field == "entries[0].chunks"
    assert "retrieval.max_chunks_per_item" in many.value.message

    with pytest.raises(InvalidArgumentError, match="9 characters; the limit is 8") as long_id:
        limits.check(retrieval_pb2.DeleteRequest(collection="faq", ids=["ok", "x" * 9]))
    assert long_id.value.field == "ids[1]"

    with pytest.raises(InvalidArgumentError) as key:
        limits.check(
            confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(extra={"k" * 9: 1.0}))
        )
    assert key.value.field is not None
    assert key.value.field.startswith("signals.extra key")

    quote = entailment_pb2.QuoteQuery(premise="p", quote="q" * 1_001)
    with pytest.raises(InvalidArgumentError, match=r"entailment\.max_quote_chars") as q:
        RequestLimits.from_settings(load_settings()).check(
            entailment_pb2.CheckQuotesRequest(quotes=[quote])
        )
    assert q.value.field == "quotes[0].quote"


def test_a_batch_too_big_is_resource_exhausted() -> None:
    limits = RequestLimits.from_settings(load_settings(gateway={"max_items_per_request": 2}))
    item = gateway_pb2.LabelRequest(query="q", chunk="c")
    with pytest.raises(ResourceExhaustedError, match="split the request") as caught:
        limits.check(gateway_pb2.BatchLabelRequest(items=[item] * 3))
    assert caught.value.field == "items"


def test_a_request_within_every_limit_passes() -> None:
    limits = RequestLimits.from_settings(load_settings())
    limits.check(
        gateway_pb2.BatchLabelRequest(
            items=[gateway_pb2.LabelRequest(query="q", chunk="c", answers=["a"], item_id="i")] * 3
        )
    )
