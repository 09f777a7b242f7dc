"""The transactional producer's coordinator conversation (against a scripted broker), and the
verdicts of the hanging-transaction check."""

from __future__ import annotations

from collections import Counter

import pytest
import trio
import trio.testing

from rivven_kproto.client import KafkaClient, KafkaResponseError
from rivven_kproto.client.client import BrokerInfo
from rivven_kproto.client.transactional import MAX_SEQUENCE, Transaction, first_error
from rivven_kproto.client.transactions import ActiveProducer, TransactionDescription, _verdict
from rivven_kproto.codec.connection import RequestEvent, ServerConnection, encode_response
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsResponse
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse
from rivven_kproto.codec.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from rivven_kproto.codec.schema import Response
from rivven_kproto.net.connection import BrokerConnection

APIS = [
    ApiVersion(api_key=10, min_version=0, max_version=4),
    ApiVersion(api_key=18, min_version=0, max_version=3),
    ApiVersion(api_key=22, min_version=0, max_version=4),
    ApiVersion(api_key=24, min_version=0, max_version=3),
    ApiVersion(api_key=26, min_version=0, max_version=3),
]


class ScriptedCoordinator:
    """Answers each API with a queue of error codes (then NONE) and records what it was asked."""

    def __init__(self, errors: dict[int, list[Errors]]) -> None:
        self.errors = {key: list(codes) for key, codes in errors.items()}
        self.asked: list[int] = []
        self.requests: list[object] = []

    def _error(self, api_key: int) -> Errors:
        queue = self.errors.get(api_key, [])
        return queue.pop(0) if queue else Errors.NONE

    def answer(self, event: RequestEvent) -> bytes:
        header, request = event.header, event.request
        key = header.request_api_key
        response: Response
        if key == 18:
            response = ApiVersionsResponse(error_code=0, api_keys=APIS)
        else:
            self.asked.append(key)
            self.requests.append(request)
            error = self._error(key)
            if isinstance(request, FindCoordinatorRequest):
                assert request.key_type == 1 and request.coordinator_keys == ["tid"]
                node = -1 if error else 0
                response = FindCoordinatorResponse(
                    coordinators=[Coordinator(key="tid", node_id=node, host="h", port=1, error_code=error, error_message=None)]
                )
            elif isinstance(request, InitProducerIdRequest):
                assert request.transactional_id == "tid" and request.transaction_timeout_ms == 5000
                response = InitProducerIdResponse(error_code=error, producer_id=-1 if error else 7, producer_epoch=-1 if error else 3)
            elif isinstance(request, AddPartitionsToTxnRequest):
                assert (request.v3_and_below_producer_id, request.v3_and_below_producer_epoch) == (7, 3)
                response = AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
                    AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
                        AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=error) for p in t.partitions
                    ])
                    for t in request.v3_and_below_topics
                ])
            else:
                assert isinstance(request, EndTxnRequest)
                response = EndTxnResponse(error_code=error)
        return encode_response(header, response)

    async def serve(self, stream: trio.abc.Stream) -> None:
        connection = ServerConnection()
        while data := await stream.receive_some():
            connection.receive_data(bytes(data))
            while (event := connection.next_event()) is not None:
                await stream.send_all(self.answer(event))


async def _run(script: ScriptedCoordinator, body: object) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(script.serve, server_stream)
        connection = BrokerConnection(client_stream, "h:1", node_id=0, client_id="test")
        await connection._negotiate()
        client = KafkaClient("h:1", timeout=10)
        client._bootstrap_connection = connection
        client._by_address["h:1"] = connection
        client.brokers = {0: BrokerInfo(0, "h", 1)}
        await body(client)  # type: ignore[operator]
        nursery.cancel_scope.cancel()


async def test_transaction_retries_what_kafka_clients_retry(autojump_clock: trio.testing.MockClock) -> None:
    script = ScriptedCoordinator({
        10: [Errors.COORDINATOR_LOAD_IN_PROGRESS],
        22: [Errors.CONCURRENT_TRANSACTIONS, Errors.NOT_COORDINATOR],
        24: [Errors.CONCURRENT_TRANSACTIONS],
    })

    async def body(client: KafkaClient) -> None:
        txn = Transaction(client, "tid", 5000)
        await txn.init()
        assert (txn.producer_id, txn.producer_epoch, txn.coordinator) == (7, 3, 0)
        await txn.add_partitions("t", [1, 0, 1])
        await txn.add_partitions("t", [0])  # already in the transaction: no request
        assert txn.partitions == {("t", 0), ("t", 1)}
        assert await txn.end(commit=True) is True
        assert await txn.end(commit=True) is False  # nothing written since: no request

    await _run(script, body)
    # FindCoordinator retried, InitProducerId retried after CONCURRENT_TRANSACTIONS and after a
    # NOT_COORDINATOR (which looks the coordinator up again), AddPartitionsToTxn once more.
    assert script.asked == [10, 10, 22, 22, 10, 22, 24, 24, 26]
    added = [r for r in script.requests if isinstance(r, AddPartitionsToTxnRequest)]
    assert added[-1].v3_and_below_topics[0].partitions == [0, 1]
    (ended,) = [r for r in script.requests if isinstance(r, EndTxnRequest)]
    assert (ended.transactional_id, ended.producer_id, ended.producer_epoch, ended.committed) == ("tid", 7, 3, True)


async def test_transaction_errors_that_are_not_retried(autojump_clock: trio.testing.MockClock) -> None:
    script = ScriptedCoordinator({24: [Errors.UNKNOWN_TOPIC_OR_PARTITION], 26: [Errors.PRODUCER_FENCED]})

    async def body(client: KafkaClient) -> None:
        txn = Transaction(client, "tid", 5000)
        await txn.init()
        with pytest.raises(KafkaResponseError, match="adding t") as info:
            await txn.add_partitions("t", [0])
        assert info.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and txn.partitions == set()
        await txn.add_partitions("t", [0])
        with pytest.raises(KafkaResponseError, match="aborting transaction tid") as ended:
            await txn.end(commit=False)
        assert ended.value.name == "PRODUCER_FENCED"

    await _run(script, body)
    assert Counter(script.asked) == Counter({10: 1, 22: 1, 24: 2, 26: 1})


async def test_coordinator_never_available_times_out(autojump_clock: trio.testing.MockClock) -> None:
    script = ScriptedCoordinator({10: [Errors.COORDINATOR_NOT_AVAILABLE] * 1000})

    async def body(client: KafkaClient) -> None:
        with pytest.raises(Exception) as info:
            await Transaction(client, "tid", 5000).init()
        assert getattr(info.value, "name", None) == "REQUEST_TIMED_OUT"

    await _run(script, body)


def test_sequences_per_partition_wrap_like_kafka() -> None:
    txn = Transaction(None, "tid")  # type: ignore[arg-type]
    assert [txn.next_sequence("t", 0, 3), txn.next_sequence("t", 0, 2), txn.next_sequence("t", 1, 1)] == [0, 3, 0]
    txn._sequences[("t", 2)] = MAX_SEQUENCE - 1
    assert txn.next_sequence("t", 2, 5) == MAX_SEQUENCE - 1
    assert txn.next_sequence("t", 2, 1) == 3


def test_first_error_prefers_the_cause_over_operation_not_attempted() -> None:
    assert first_error([0, Errors.OPERATION_NOT_ATTEMPTED, Errors.UNKNOWN_TOPIC_OR_PARTITION]) == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert first_error([Errors.OPERATION_NOT_ATTEMPTED]) == Errors.OPERATION_NOT_ATTEMPTED
    assert first_error([0, 0]) == 0 and first_error([]) == 0


OPEN = ActiveProducer(producer_id=5, producer_epoch=2, last_sequence=0, last_timestamp=1000, coordinator_epoch=-1, current_txn_start_offset=40)


def _described(**changes: object) -> TransactionDescription:
    fields: dict[str, object] = {
        "transactional_id": "tid", "coordinator": 0, "state": "Ongoing", "producer_id": 5, "producer_epoch": 2,
        "timeout_ms": 60000, "start_time_ms": 900, "partitions": [("t", 0)],
    }
    fields.update(changes)
    return TransactionDescription(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("transactional_id", "described", "hanging", "reason"),
    [
        ("tid", _described(), False, "ongoing in its coordinator"),
        (None, None, True, "no transactional id"),
        ("tid", None, True, "no transactional id"),
        ("tid", _described(state="CompleteCommit"), True, "is CompleteCommit"),
        ("tid", _described(producer_epoch=3), True, "has epoch 3"),
        ("tid", _described(partitions=[("t", 1)]), True, "does not include this partition"),
    ],
)
def test_hanging_verdicts(transactional_id: str | None, described: TransactionDescription | None, hanging: bool, reason: str) -> None:
    verdict = _verdict("t", 0, OPEN, 5000, transactional_id, described)
    assert verdict.hanging is hanging and reason in verdict.reason
    assert (verdict.topic, verdict.partition, verdict.age_ms, verdict.producer) == ("t", 0, 5000, OPEN)
