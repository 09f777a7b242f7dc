"""ApiVersions answers are pinned (built and encoded once per version and configuration): the
bytes served must be exactly those of an answer built afresh, and a configuration that changes the
answer must never get another configuration's bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rivven_kproto.codec.connection import encode_response
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.codec.messages.heartbeat import HeartbeatResponse
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import api_versions
from rivven_kproto.server.metrics import BrokerMetrics

from .test_txn_v2_handlers import make_ctx

VERSIONS = list(ApiVersionsRequest.VALID_VERSIONS)
LEVELS = [0, 1, 2]


@pytest.fixture
def contexts(tmp_path: Path) -> Iterator[dict[int, RequestContext]]:
    by_level = {level: make_ctx(tmp_path, level) for level in LEVELS}
    yield by_level
    for ctx in by_level.values():
        ctx.broker.close()


def fresh(version: int, level: int) -> ApiVersionsResponse:
    """Built without any cache: the table as a plain list, nothing pinned."""
    response = api_versions.build(version, level)
    response.api_keys = api_versions.supported_versions()
    return response


def test_the_pinned_answer_is_the_fresh_one_for_every_version_and_level(contexts: dict[int, RequestContext]) -> None:
    for version in VERSIONS:
        for level, ctx in contexts.items():
            answer = api_versions.handle(ctx, ApiVersionsRequest(), version)
            assert answer.pinned
            assert answer is api_versions.handle(ctx, ApiVersionsRequest(), version)  # served from the cache
            assert answer.encode(version) == fresh(version, level).encode(version), (version, level)
            header = RequestHeader(request_api_key=18, request_api_version=version, correlation_id=7 + version)
            assert encode_response(header, answer) == encode_response(header, fresh(version, level))
            assert ApiVersionsResponse.decode(answer.encode(version), version) == ApiVersionsResponse.decode(
                fresh(version, level).encode(version), version)


def test_a_configuration_that_changes_the_answer_gets_its_own(contexts: dict[int, RequestContext]) -> None:
    # Interleaved, so a cache keyed on the version alone would serve the first level's bytes to the others.
    for version in VERSIONS:
        answers = {level: api_versions.handle(ctx, ApiVersionsRequest(), version).encode(version)
                   for level, ctx in contexts.items()}
        for level in LEVELS:
            assert answers[level] == fresh(version, level).encode(version)
        if version >= 3:  # the finalized transaction.version is in the body from v3
            assert len(set(answers.values())) == len(LEVELS)
            assert transaction_level(answers[0], version) is None
            assert transaction_level(answers[2], version) == 2


def transaction_level(answer: bytes, version: int) -> int | None:
    finalized = ApiVersionsResponse.decode(answer, version).finalized_features
    return next((f.max_version_level for f in finalized if f.name == "transaction.version"), None)


def test_a_pinned_message_encodes_other_versions_afresh() -> None:
    response = HeartbeatResponse(throttle_time_ms=0, error_code=27).pin(4)
    for version in range(4):
        assert response.encode(version) == HeartbeatResponse(throttle_time_ms=0, error_code=27).encode(version)
    assert response.encode(4) == HeartbeatResponse(throttle_time_ms=0, error_code=27).encode(4)


def test_a_pinned_answer_counts_its_error_codes_at_every_request() -> None:
    metrics = BrokerMetrics()
    answer = HeartbeatResponse(throttle_time_ms=0, error_code=27).pin(4)  # REBALANCE_IN_PROGRESS
    for _ in range(3):
        metrics.observe_request(12, 0.001, answer, 4)
    metrics.observe_request(18, 0.001, ApiVersionsResponse(error_code=0, api_keys=[]).pin(0), 0)
    errors = {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        if family.name == "rivven_request_errors" for sample in family.samples
    }
    assert errors == {(("api", "Heartbeat"), ("error", "REBALANCE_IN_PROGRESS")): 3.0}
