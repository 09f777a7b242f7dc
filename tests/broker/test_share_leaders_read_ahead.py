"""``LeaderShares`` replays a partition's share-state log read ahead (on a worker thread, by the
server: ``server/share_loading.py``) instead of reading it on the event loop at first use."""

from __future__ import annotations

from rivven_kproto.broker.share import LeaderShares, ShareConfig
from rivven_kproto.codec.errors import Errors, KafkaError


class Log:
    """A share-state log that says whether it was read ahead before its replay."""

    def __init__(self) -> None:
        self.ahead = False
        self.replayed_ahead: bool | None = None
        self.appended = 0
        self.pending = False

    def preload(self) -> None:
        self.ahead = True

    def open(self) -> list[bytes]:
        self.replayed_ahead = self.ahead
        return []


class Partition:
    """A led partition's log (only its identity matters here)."""


def leader_of(led: dict[tuple[str, int], Partition], logs: list[Log]) -> LeaderShares:
    def partition(topic: str, index: int) -> Partition:
        if (topic, index) not in led:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, "not led here")
        return led[(topic, index)]

    def open_log(_: Partition) -> Log:
        logs.append(Log())
        return logs[-1]

    return LeaderShares(ShareConfig(), partition, open_log)


def test_a_partition_read_ahead_is_replayed_from_that_read() -> None:
    led = {("t", 0): Partition()}
    logs: list[Log] = []
    shares = leader_of(led, logs)
    wanted = shares.to_load([("t", 0), ("t", 1)])  # t-1 is not led here: nothing to read
    assert [key for key, _, _ in wanted] == [("t", 0)]
    for key, partition, log in wanted:
        log.preload()
        shares.read_ahead(key, partition, log)
    assert shares.to_load([("t", 0)]) == []  # read once
    assert shares.current("g", "t", 0) is None
    assert len(logs) == 1 and logs[0].replayed_ahead is True
    assert shares.to_load([("t", 0)]) == []  # loaded


def test_a_read_ahead_of_a_partition_led_by_another_log_now_is_not_used() -> None:
    led = {("t", 0): Partition()}
    logs: list[Log] = []
    shares = leader_of(led, logs)
    ((key, partition, log),) = shares.to_load([("t", 0)])
    log.preload()
    shares.read_ahead(key, partition, log)
    led[("t", 0)] = Partition()  # the partition moved away and back: another log object
    shares.current("g", "t", 0)
    assert [each.replayed_ahead for each in logs] == [None, False]  # read again, at first use
