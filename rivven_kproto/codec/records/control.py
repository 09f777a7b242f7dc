"""Control records: the transaction markers a coordinator writes to end a transaction.

A control batch has the transactional and control attribute bits set, is never compressed and holds
one record whose key and value are (big-endian)::

    key:   int16 version (0) | int16 type (0 = ABORT, 1 = COMMIT)
    value: int16 version (0) | int32 coordinator_epoch

Consumers use the marker to drop (read_committed) or keep the producer's records; the
coordinator epoch lets a broker reject markers from a stale coordinator. Other control types
exist only in KRaft's metadata log and are listed for recognition, not built here.
"""

from __future__ import annotations

import enum
import struct

from ..compression import Compression
from .records import Record, RecordBatch, RecordFormatError, build_batch

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    # KRaft metadata-log control records; never seen in a data partition.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def build_control_batch(
    kind: ControlType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A one-record, uncompressed, transactional control batch carrying an ABORT/COMMIT marker."""
    kind = ControlType(kind)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise ValueError(f"only ABORT and COMMIT markers can be built, not {kind.name}")
    record = Record(
        offset_delta=0,
        timestamp_delta=0,
        key=_KEY.pack(CONTROL_KEY_VERSION, kind),
        value=_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        compression=Compression.NONE,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def control_type(record: Record) -> int:
    """The type id in a control record's key (an int, since newer types may be unknown to us)."""
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise RecordFormatError("control record key shorter than 4 bytes")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise RecordFormatError(f"invalid control record key version {version}")
    return kind


def is_abort_marker(batch: RecordBatch) -> bool:
    """Whether a control batch is an ABORT marker, the one a read_committed consumer needs to
    recognize (``visibility.py``); an empty batch or a malformed key is not one."""
    if not batch.records:
        return False
    try:
        return control_type(batch.records[0]) == ControlType.ABORT
    except RecordFormatError:
        return False


def parse_control_record(record: Record) -> tuple[ControlType, int]:
    """(ABORT or COMMIT, coordinator_epoch) of a transaction marker.

    Newer key/value versions are accepted as long as they start with the v0 fields, as Kafka does.
    """
    kind = control_type(record)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise RecordFormatError(f"control record type {kind} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _VALUE.size:
        raise RecordFormatError("transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise RecordFormatError(f"invalid transaction marker version {version}")
    return ControlType(kind), coordinator_epoch
