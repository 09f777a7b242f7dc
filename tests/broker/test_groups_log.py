"""The group coordinator's durable log: replay, torn and corrupt tails, compaction, failed writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rivven_kproto.broker.durable.log import MAGIC, DurableLog, frame
from rivven_kproto.broker.groups import LeavingMember
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.groups.records import (
    GroupRecord,
    GroupTombstone,
    MemberRecord,
    OffsetRecord,
    OffsetTombstone,
    RecordError,
    decode_records,
    encode_records,
)
from rivven_kproto.codec.errors import Errors, KafkaError

from .group_helpers import SESSION, Harness

LOG_NAME = "groups-0000000000.log"  # the first file of the coordinator's durable log


def GroupLog(directory: Path) -> DurableLog:  # noqa: N802 - reads as the class it stands for
    return DurableLog(directory, "groups")


def log_bytes(directory: Path) -> int:
    """What the log occupies: its snapshot and log files."""
    return sum(path.stat().st_size for path in directory.glob("groups-*"))


def commit(h: Harness, topic: str, partition: int, offset: int, group: str = "g", generation: int = -1,
           member: str = "") -> None:
    part = CommitPartition(topic, partition, offset, -1, f"meta-{offset}")
    assert h.c.commit_offsets(group, generation, member, None, [part], h.now, version=8) == [Errors.NONE]


def offsets(h: Harness, group: str = "g") -> dict[tuple[str, int], int]:
    return {key: value.offset for key, value in h.c.offsets.of_group(group).items()}


def test_records_round_trip() -> None:
    member = MemberRecord("m", "i", "c", "/h", 3, 4, (("range", b"\x00\xff"),), b"\x01")
    records = [
        OffsetRecord("g", "t", 1, 2, 3, "ünï", 4, -1),
        OffsetTombstone("g", "t", 1),
        GroupRecord("g", "consumer", 7, "range", "m", 9, (member,)),
        GroupRecord("simple", None, 0, None, None, -1),
        GroupTombstone("g"),
    ]
    assert decode_records(encode_records(records)) == records  # type: ignore[arg-type]
    for bad in (b"{}", b"[{\"type\": \"nope\"}]", b"[{\"type\": \"offset\"}]", b"\xff"):
        with pytest.raises(RecordError):
            decode_records(bad)


def test_offsets_and_groups_survive_a_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    (a, b), gen = h.stable(2)
    commit(h, "t", 0, 42, generation=gen, member=a)
    commit(h, "t", 1, 43, group="simple")
    h.reopen()  # no close(): what a kill -9 leaves is what the OS has
    group = h.c.groups["g"]
    assert (group.state.value, group.generation_id, group.leader_id, group.protocol_name) == ("Stable", gen, a, "range")
    assert [(m.member_id, m.assignment) for m in group.members.values()] == [(a, b"a0"), (b, b"a1")]
    assert offsets(h) == {("t", 0): 42} and offsets(h, "simple") == {("t", 1): 43}
    assert h.c.offsets.get("g", "t", 0).metadata == "meta-42"
    # Loaded members heartbeat on; one that does not is expired after a session.
    assert h.heartbeat(a, gen) is Errors.NONE
    h.advance(SESSION // 2)
    assert h.heartbeat(a, gen) is Errors.NONE
    h.advance(SESSION // 2)
    assert [m.member_id for m in h.c.groups["g"].members.values()] == [a]


def test_empty_group_and_deletions_replay(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    (a,), gen = h.stable(1)
    commit(h, "t", 0, 1, generation=gen, member=a)
    commit(h, "t", 1, 2, generation=gen, member=a)
    h.c.leave("g", [LeavingMember(a, None)], h.now)
    assert h.c.delete_offsets("g", [("t", [1])]) == [("t", [(1, Errors.NONE)])]
    commit(h, "x", 0, 1, group="gone")
    assert h.c.delete_groups(["gone"]) == [("gone", Errors.NONE)]
    h.reopen()
    assert h.c.groups["g"].state.value == "Empty" and h.c.groups["g"].generation_id == gen + 1
    assert offsets(h) == {("t", 0): 1}
    assert "gone" not in h.c.groups and offsets(h, "gone") == {}


@pytest.mark.parametrize("cut", [1, 5, 12, -1])
def test_torn_last_entry_is_dropped_and_everything_before_kept(tmp_path: Path, cut: int) -> None:
    h = Harness(tmp_path)
    for i in range(5):
        commit(h, "t", i, 100 + i)
    path = tmp_path / LOG_NAME
    size_before_last = path.stat().st_size
    commit(h, "t", 9, 999)
    full = path.stat().st_size
    keep = size_before_last + cut if cut > 0 else full - 1
    with path.open("r+b") as f:
        f.truncate(keep)
    h.reopen()
    assert offsets(h) == {("t", i): 100 + i for i in range(5)}
    assert path.stat().st_size == size_before_last  # the torn bytes are gone for good
    commit(h, "t", 9, 1000)  # and later entries land after the good ones
    h.reopen()
    assert offsets(h)[("t", 9)] == 1000 and len(offsets(h)) == 6


def test_corrupt_entry_truncates_it_and_all_after(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    commit(h, "t", 0, 1)
    path = tmp_path / LOG_NAME
    second = path.stat().st_size
    commit(h, "t", 1, 2)
    commit(h, "t", 2, 3)
    data = bytearray(path.read_bytes())
    data[second + 20] ^= 0xFF  # a byte inside the second entry's payload
    path.write_bytes(bytes(data))
    h.reopen()
    assert offsets(h) == {("t", 0): 1}
    assert path.stat().st_size == second


def test_garbage_length_is_treated_as_torn(tmp_path: Path) -> None:
    log = GroupLog(tmp_path)
    log.open()
    log.append(b"[]")
    log.close()
    with (tmp_path / LOG_NAME).open("ab") as f:
        f.write(b"\xff\xff\xff\xff" + b"\x00" * 20)
    assert GroupLog(tmp_path).open() == [b"[]"]


def test_wrong_magic_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / LOG_NAME).write_bytes(b"NOTAGRPLOG" + frame(b"[]"))
    with pytest.raises(ValueError, match="not a rivven_kproto durable log"):
        GroupLog(tmp_path).open()


def test_leftover_tmp_file_is_removed_and_short_file_recreated(tmp_path: Path) -> None:
    tmp = tmp_path / "groups-0000000001.snapshot.tmp"
    tmp.write_bytes(b"half a compaction")
    (tmp_path / LOG_NAME).write_bytes(MAGIC[:3])  # a crash while creating the file
    assert GroupLog(tmp_path).open() == []
    assert not tmp.exists()
    assert (tmp_path / LOG_NAME).read_bytes() == MAGIC


def test_compaction_bounds_the_log_and_keeps_the_state(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_bytes=4096)
    (a, b), gen = h.stable(2)
    sizes = []
    for round_ in range(300):
        commit(h, "t", round_ % 3, round_, generation=gen, member=a)
        sizes.append(log_bytes(tmp_path))
    assert max(sizes) < 3 * 4096
    assert min(sizes[100:]) < sizes[0] * 4  # it shrank again after growing
    state = sorted(map(repr, h.c.snapshot_records()))
    h.reopen()
    assert sorted(map(repr, h.c.snapshot_records())) == state
    assert offsets(h) == {("t", 0): 297, ("t", 1): 298, ("t", 2): 299}
    assert [m.member_id for m in h.c.groups["g"].members.values()] == [a, b]


def test_snapshot_keeps_the_last_persisted_group_not_soft_state(tmp_path: Path) -> None:
    h = Harness(tmp_path, compact_bytes=1)
    (a,), gen = h.stable(1)
    h.new_member()  # PreparingRebalance with a second member: soft state, never written
    commit(h, "t", 0, 5, group="other")  # forces a compaction
    h.reopen()
    assert [m.member_id for m in h.c.groups["g"].members.values()] == [a]
    assert h.c.groups["g"].generation_id == gen


def test_compaction_right_after_a_group_record_keeps_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path)
    monkeypatch.setattr(h.c, "_compaction_due", lambda: True)  # compact after every write
    (a, b), gen = h.stable(2)  # the last write is the leader's assignment
    h.reopen()
    group = h.c.groups["g"]
    assert (group.generation_id, group.state.value) == (gen, "Stable")
    assert [(m.member_id, m.assignment) for m in group.members.values()] == [(a, b"a0"), (b, b"a1")]


def test_failed_compaction_keeps_the_old_log_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path)
    monkeypatch.setattr(h.c, "_compaction_due", lambda: True)

    def disk_full(self: DurableLog, snapshot: object, now: bool = False) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DurableLog, "roll", disk_full)
    commit(h, "t", 0, 1)
    commit(h, "t", 1, 2)
    h.reopen()
    assert offsets(h) == {("t", 0): 1, ("t", 1): 2}


def test_snapshot_is_chunked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path)
    parts = [CommitPartition("t", p, p, -1, "") for p in range(2500)]
    h.c.commit_offsets("g", -1, "", None, parts, h.now, version=8)
    h.c._compact()
    assert len(GroupLog(tmp_path).open()) == 3  # 2500 offset records in 1000s; a simple group has no group record
    h.reopen()
    assert len(offsets(h)) == 2500


def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path)
    commit(h, "t", 0, 1)
    size = (tmp_path / LOG_NAME).stat().st_size
    real_write = os.write

    def failing_write(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:7])  # a partial write, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(KafkaError) as info:
        commit(h, "t", 0, 2)
    assert info.value.error is Errors.NOT_COORDINATOR
    monkeypatch.setattr(os, "write", real_write)
    assert offsets(h) == {("t", 0): 1}
    assert (tmp_path / LOG_NAME).stat().st_size == size  # the partial entry was cut off
    commit(h, "t", 0, 3)
    h.reopen()
    assert offsets(h) == {("t", 0): 3}


def test_the_coordinator_never_fsyncs_its_log_is_synced_by_the_flusher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends reach the OS only; ``begin_sync`` hands the flusher what to fsync, once."""
    h = Harness(tmp_path)
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    commit(h, "t", 0, 1)
    h.advance(10_000)
    assert calls == []
    assert h.c.log is not None
    pending = h.c.log.begin_sync()
    assert pending is not None and pending.descriptors
    pending.sync()
    assert len(calls) >= 1 and h.c.log.begin_sync() is None  # nothing new to sync
    commit(h, "t", 0, 2)
    assert h.c.log.begin_sync() is not None


def test_the_old_single_file_log_is_adopted(tmp_path: Path) -> None:
    """Earlier versions wrote ``groups.log`` (magic KPGRPLG1, the same entries)."""
    h = Harness(tmp_path)
    commit(h, "t", 0, 7)
    data = (tmp_path / LOG_NAME).read_bytes()
    (tmp_path / LOG_NAME).unlink()
    (tmp_path / "groups.log").write_bytes(b"KPGRPLG1" + data[len(MAGIC):])
    h.reopen()
    assert offsets(h) == {("t", 0): 7}
    assert not (tmp_path / "groups.log").exists()
    commit(h, "t", 0, 8)
    h.reopen()
    assert offsets(h) == {("t", 0): 8}
