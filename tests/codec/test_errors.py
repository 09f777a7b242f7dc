"""Error-code table: spot checks against Kafka's protocol guide and a cross-check with kafka-python."""

from __future__ import annotations

import pickle

import pytest

from rivven_kproto.codec.errors import Errors, KafkaError


@pytest.mark.parametrize(
    ("member", "code", "retriable"),
    [
        (Errors.UNKNOWN_SERVER_ERROR, -1, False),
        (Errors.NONE, 0, False),
        (Errors.OFFSET_OUT_OF_RANGE, 1, False),
        (Errors.CORRUPT_MESSAGE, 2, True),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
        (Errors.NOT_LEADER_OR_FOLLOWER, 6, True),
        (Errors.MESSAGE_TOO_LARGE, 10, False),
        (Errors.NOT_COORDINATOR, 16, True),
        (Errors.UNSUPPORTED_VERSION, 35, False),
        (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 45, False),
        (Errors.INVALID_TXN_STATE, 48, False),
        (Errors.CONCURRENT_TRANSACTIONS, 51, True),
        (Errors.UNKNOWN_PRODUCER_ID, 59, False),
        (Errors.INVALID_RECORD, 87, False),
        (Errors.PRODUCER_FENCED, 90, False),
        (Errors.POSITION_OUT_OF_RANGE, 99, False),
        (Errors.UNKNOWN_TOPIC_ID, 100, True),
        (Errors.TRANSACTION_ABORTABLE, 120, False),
        (Errors.INVALID_REGULAR_EXPRESSION, 128, False),
        (Errors.REBOOTSTRAP_REQUIRED, 129, False),
        (Errors.SHARE_SESSION_LIMIT_REACHED, 133, True),
    ],
)
def test_known_codes(member: Errors, code: int, retriable: bool) -> None:
    assert int(member) == code
    assert Errors(code) is member
    assert member.retriable is retriable


def test_table_is_dense_and_unique() -> None:
    codes = [int(e) for e in Errors]
    assert len(codes) == len(set(codes))
    assert sorted(codes) == list(range(-1, 134))
    assert len({e.name for e in Errors}) == len(codes)


def test_messages() -> None:
    assert Errors.NONE.message == ""
    assert all(e.message for e in Errors if e is not Errors.NONE)
    assert Errors.UNKNOWN_TOPIC_OR_PARTITION.message == "This server does not host this topic-partition."


def test_for_code_maps_unknown_to_unknown_server_error() -> None:
    assert Errors.for_code(3) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert Errors.for_code(30000) is Errors.UNKNOWN_SERVER_ERROR


def test_kafka_error() -> None:
    err = KafkaError(Errors.INVALID_TXN_STATE, "not in a transaction")
    assert err.error is Errors.INVALID_TXN_STATE
    assert err.message == "not in a transaction"
    assert err.code == 48
    assert not err.retriable
    assert "INVALID_TXN_STATE" in str(err)
    default = KafkaError(Errors.NOT_COORDINATOR)
    assert default.message == Errors.NOT_COORDINATOR.message
    assert default.retriable
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.error, copy.message) == (err.error, err.message)


# kafka-python names a few codes after older Kafka releases, and classifies CORRUPT_MESSAGE as
# non-retriable although Kafka's CorruptRecordException extends RetriableException.
_KAFKA_PYTHON_NAMES = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}
_KAFKA_PYTHON_RETRIABLE_DIFFERS = {2}


def test_cross_check_with_kafka_python() -> None:
    kafka_errors = pytest.importorskip("kafka.errors")
    checked = 0
    for code, cls in kafka_errors.kafka_errors.items():
        if code is None:
            continue
        ours = Errors(code)
        assert cls.message == _KAFKA_PYTHON_NAMES.get(code, ours.name), code
        if code not in _KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert cls.retriable == ours.retriable, code
        checked += 1
    assert checked > 100
