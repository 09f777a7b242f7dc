"""The transform stage's end-of-input test (``TransformStage._past``) with a stand-in consumer."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import TopicPartition  # noqa: E402

from rivven_kproto.verify.transform import TransformStage  # noqa: E402

UNSET = -1001  # librdkafka's OFFSET_INVALID: nothing consumed since the assignment


class FakeConsumer:
    def __init__(self, positions: dict[int, int], committed: dict[int, int]) -> None:
        self.positions, self.committed_offsets = positions, committed

    def position(self, partitions: list[Any]) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.positions[tp.partition]) for tp in partitions]

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets[tp.partition]) for tp in partitions]


def stage(positions: dict[int, int], committed: dict[int, int]) -> TransformStage:
    made = TransformStage("127.0.0.1:1", "in", "out", "t")
    made.consumer = FakeConsumer(positions, committed)
    return made


def test_a_consumer_past_the_last_committed_input_is_done() -> None:
    assert stage({0: 5, 1: 9}, {0: 0, 1: 0})._past({0: 5, 1: 9})
    assert not stage({0: 5, 1: 8}, {0: 5, 1: 9})._past({0: 5, 1: 9})


def test_a_restarted_consumer_that_read_nothing_stands_at_its_committed_offset() -> None:
    # The drain used to wait out its whole timeout here: no position, yet nothing left to transform.
    assert stage({0: UNSET, 1: 9}, {0: 5, 1: 0})._past({0: 5, 1: 9})
    assert not stage({0: UNSET, 1: 9}, {0: 4, 1: 0})._past({0: 5, 1: 9})
