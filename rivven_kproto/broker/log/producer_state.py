"""Per-partition idempotent-producer state: epochs and the last five batches of each producer id.

Kafka's rules (ProducerStateManager / ProducerAppendInfo / ProducerStateEntry), applied before
anything is written:

* every cached batch belongs to the producer's current epoch: whenever a batch or a COMMIT/ABORT
  marker carries a different epoch, the epoch is replaced and the cache emptied
  (``maybeUpdateProducerEpoch``), so a marker never leaves state that a later batch can match;
* a batch whose (epoch, first sequence, last sequence) matches one of the producer's cached five
  is a duplicate: nothing is written, and the caller answers with the original offsets;
* an epoch older than the producer's current one is INVALID_PRODUCER_EPOCH;
* a new epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER); a producer id with
  no state in this partition may start at any sequence (Kafka 2.5+, KIP-360);
* within an epoch the first sequence must follow the last cached one, or be 0 when none is
  cached (wrapping after int32 max), else OUT_OF_ORDER_SEQUENCE_NUMBER (which is also what a
  duplicate older than the cache gets);
* a non-transactional batch while the producer's transaction is open here is INVALID_TXN_STATE.

One rule beyond Kafka's, because Kafka's lets a client bug lose committed data: an ABORT marker
of the producer's current epoch marks the aborted transaction's cached batches as aborted; an
aborted batch is never a duplicate, and the batch after an abort may start at any sequence from
the aborted batches' first to one past their last. librdkafka's abort_transaction drops its
queued messages and gives their sequence numbers to the next transaction's messages in the same
epoch, even when a queued message was a retry of a request the broker had written (its answer
lost to a cut connection or a restart). Kafka then answers the next transaction's new batch as a
duplicate of the aborted one: acknowledged, never written (verify-eos in CI lost a committed
record this way). A retry never crosses its transaction's marker (clients complete or drop every
in-flight batch before EndTxn), so no batch of an aborted transaction is owed a duplicate answer.

Transactions: a transactional batch opens (or extends) its producer's transaction in this
partition; a COMMIT/ABORT marker closes it. The last stable offset is the first offset of the
earliest open transaction (or the high watermark), and aborted transactions are kept as
(producer id, first offset, marker offset), what read_committed fetches return.

Snapshot file (``<20-digit offset>.snapshot`` in the partition directory; the state of every
batch below that offset): a JSON document ``{"version": 2, "offset": N, "producers": [[pid,
epoch, last_timestamp, [[first_seq, last_seq, first_offset, last_offset, timestamp(, true if
aborted)], ...], txn_first_offset], ...], "aborted": [[pid, first_offset, marker_offset], ...]}``
followed by the 8-byte big-endian xxh64 of the JSON bytes. Written atomically (temp file, fsync,
rename); a snapshot whose checksum fails is ignored and the state is rebuilt from the log.
Version 1 snapshots were written by code that let a marker raise the epoch without emptying the
cache (a later batch of the new epoch could then be answered as a duplicate of an old one and
lost); they are not trusted: the state is rebuilt from the log instead.
"""

from __future__ import annotations

import bisect
import json
import logging
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import xxhash

from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import NO_PRODUCER_ID, BatchHeader, iter_headers
from rivven_kproto.codec.records.control import ControlType, parse_control_record
from rivven_kproto.codec.records.records import decode_batch

from ..durable.files import write_atomic

log = logging.getLogger(__name__)

CACHED_BATCHES = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2
SNAPSHOT_VERSION = 2
_CHECKSUM = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int
    aborted: bool = False  # written in a transaction this producer (in this epoch) aborted


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker


def _marker_offset(aborted: AbortedTxn) -> int:
    return aborted.last_offset


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int = -1
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    txn_first_offset: int | None = None  # first offset of the producer's open transaction here

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def maybe_update_epoch(self, epoch: int) -> None:
        """A different epoch replaces the current one and empties the cache (Kafka's rule)."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def find_duplicate(self, header: BatchHeader) -> BatchMeta | None:
        """Only a batch of the current epoch can be a duplicate (the cache holds no other), and
        none of an aborted transaction."""
        if header.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence and not meta.aborted:
                return meta
        return None

    def follows(self, first_seq: int) -> bool:
        """May a batch of the current epoch start at ``first_seq``? After an abort, anywhere
        from the aborted batches' first sequence on (the client may reuse theirs)."""
        lowest = None  # the first sequence of the aborted batches at the cache's end
        for meta in reversed(self.batches):
            if not meta.aborted:
                break
            lowest = meta.first_seq
        if lowest is not None and lowest <= first_seq <= self.last_seq:
            return True
        return in_sequence(self.last_seq, first_seq)

    def mark_aborted(self, txn_first_offset: int) -> None:
        """The transaction that started at ``txn_first_offset`` here was aborted."""
        self.batches = deque(
            (replace(meta, aborted=True) if meta.first_offset >= txn_first_offset else meta for meta in self.batches),
            maxlen=CACHED_BATCHES,
        )


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producer table of one partition; the log calls ``check`` before and ``update`` after writing."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.reset()

    def reset(self) -> None:
        """An empty table: at creation, and when a truncated log rebuilds it from what it still
        holds (the object stays, so the partition and its engine keep sharing it)."""
        self.producers: dict[int, ProducerEntry] = {}
        self.duplicates = 0
        self.aborted: list[AbortedTxn] = []
        # KIP-890 part 1 on a leader that does not coordinate: a producer's first transactional
        # batch here waits for the coordinator's word; a marker in between voids it (its guard).
        self.verification_guards: dict[int, object] = {}
        # Producer id -> the transactional id its coordinator confirmed for the transaction open
        # here: a batch naming the producer under another transactional id is asked about again.
        self.verified_ids: dict[int, str] = {}

    # -- the append path ----------------------------------------------------------------------

    def needs_verification(self, producer_id: int, epoch: int, transactional_id: str) -> bool:
        """Is this transactional batch the producer's first here in its current transaction, or
        sent under a transactional id the coordinator has not confirmed for it?"""
        entry = self.producers.get(producer_id)
        return (entry is None or entry.txn_first_offset is None or entry.epoch != epoch
                or self.verified_ids.get(producer_id) != transactional_id)

    def start_verification(self, producer_id: int) -> object:
        """A guard that holds until a marker of this producer lands here (Kafka's VerificationGuard).
        Requests verified at the same time (several in flight) share it: a fresh one would void
        the others' answers."""
        guard = self.verification_guards.get(producer_id)
        if guard is None:
            guard = self.verification_guards[producer_id] = object()
        return guard

    def still_verified(self, producer_id: int, guard: object) -> bool:
        return self.verification_guards.get(producer_id) is guard

    def check(self, header: BatchHeader) -> BatchMeta | None:
        """Validate one client batch; return the cached batch if it is a duplicate, else None."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                self.duplicates += 1
                return duplicate
        self._check_epoch_and_sequence(entry, header)
        return None

    def _check_epoch_and_sequence(self, entry: ProducerEntry | None, header: BatchHeader) -> None:
        pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
        if entry is None:
            # Kafka 2.5+ (KIP-360): with no state for the producer here (new, expired, or its
            # batches removed by retention or DeleteRecords) any sequence starts it.
            return
        if epoch < entry.epoch:
            raise KafkaError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen epoch {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise KafkaError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.epoch} (current producer epoch)",
                )
        elif not entry.follows(first_seq):
            raise KafkaError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {pid} at epoch {epoch}: "
                f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)",
            )
        if entry.txn_first_offset is not None and not header.is_transactional:
            raise KafkaError(
                Errors.INVALID_TXN_STATE,
                f"Expected a transactional write from producer {pid}: its transaction is open here",
            )

    def update(self, headers: Iterable[BatchHeader]) -> None:
        """Record batches as written (with their final offsets); also used to replay the log."""
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.is_control:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = ProducerEntry(header.producer_id, header.producer_epoch)
                self.producers[header.producer_id] = entry
            elif header.producer_epoch < entry.epoch:
                continue  # a replayed batch from a fenced epoch: it changes nothing
            entry.maybe_update_epoch(header.producer_epoch)
            entry.batches.append(
                BatchMeta(
                    header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
                    header.max_timestamp,
                )
            )
            entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
            if header.is_transactional and entry.txn_first_offset is None:
                entry.txn_first_offset = header.base_offset

    def complete_txn(self, producer_id: int, producer_epoch: int, marker_offset: int, commit: bool) -> AbortedTxn | None:
        """Apply a COMMIT/ABORT marker written at ``marker_offset``; returns the aborted range, if any.

        A marker of a newer epoch (the coordinator fenced the producer) moves the producer to that
        epoch with an empty cache, exactly as a batch of that epoch would: no batch of the new
        epoch can then be mistaken for a duplicate of an older one.
        """
        self.verification_guards.pop(producer_id, None)
        self.verified_ids.pop(producer_id, None)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
            self.producers[producer_id] = entry
        elif producer_epoch > entry.epoch:
            entry.maybe_update_epoch(producer_epoch)
        first = entry.txn_first_offset
        entry.txn_first_offset = None
        if first is None or commit:
            return None
        if producer_epoch == entry.epoch:
            entry.mark_aborted(first)
        aborted = AbortedTxn(producer_id, first, marker_offset)
        self.aborted.append(aborted)
        return aborted

    def ongoing(self) -> Iterator[ProducerEntry]:
        """The producers with a transaction open here."""
        return (e for e in self.producers.values() if e.txn_first_offset is not None)

    def ongoing_first_offsets(self) -> list[int]:
        return [e.txn_first_offset for e in self.ongoing() if e.txn_first_offset is not None]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the earliest open transaction, or the high watermark when none is."""
        return min(min(self.ongoing_first_offsets(), default=high_watermark), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping offsets [start, end), what Fetch read_committed lists.

        ``aborted`` is in marker order, so a bisection skips every transaction that ended before
        ``start``: a consumer near the tail looks at the few recent ones only."""
        first = bisect.bisect_left(self.aborted, start, key=_marker_offset)
        return [a for a in self.aborted[first:] if a.first_offset < end]

    def forget_aborted_before(self, offset: int) -> None:
        """Drop aborted transactions that ended below the log start offset: no fetch can need them."""
        cut = bisect.bisect_left(self.aborted, offset, key=_marker_offset)
        if cut:
            del self.aborted[:cut]

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``; returns how many."""
        stale = [
            pid
            for pid, e in self.producers.items()
            if e.last_timestamp < now_ms - expiration_ms and e.txn_first_offset is None
        ]
        for pid in stale:
            del self.producers[pid]
        return len(stale)

    # -- snapshots ----------------------------------------------------------------------------

    def encode_snapshot(self, offset: int) -> bytes:
        """The table as of ``offset``, as snapshot bytes (``store_snapshot`` writes them)."""
        doc = {
            "version": SNAPSHOT_VERSION,
            "offset": offset,
            "producers": [
                [
                    e.producer_id, e.epoch, e.last_timestamp, [list(_meta_tuple(m)) for m in e.batches],
                    e.txn_first_offset,
                ]
                for e in self.producers.values()
            ],
            "aborted": [[a.producer_id, a.first_offset, a.last_offset] for a in self.aborted],
        }
        payload = json.dumps(doc, separators=(",", ":")).encode()
        return payload + _CHECKSUM.pack(xxhash.xxh64_intdigest(payload))

    def write_snapshot(self, offset: int) -> None:
        store_snapshot(self.directory, offset, self.encode_snapshot(offset))

    def snapshot_path(self, offset: int) -> Path:
        return snapshot_path(self.directory, offset)

    def snapshot_offsets(self) -> list[int]:
        return snapshot_offsets(self.directory)

    def load_latest_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest valid snapshot at or below the log end; returns its offset.

        Snapshots above the log end (the log was truncated in recovery) are deleted.
        """
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            state = _read_snapshot(path)
            if state is None:
                log.warning("ignoring corrupt or outdated producer snapshot %s; rebuilding from the log", path)
                continue
            self.producers, self.aborted = state
            return offset
        return None


def _meta_tuple(meta: BatchMeta) -> tuple[int | bool, ...]:
    fields = meta.first_seq, meta.last_seq, meta.first_offset, meta.last_offset, meta.timestamp
    return (*fields, True) if meta.aborted else fields


def _read_snapshot(path: Path) -> tuple[dict[int, ProducerEntry], list[AbortedTxn]] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    payload, tail = data[:-8], data[-8:]
    if len(data) < 8 or _CHECKSUM.unpack(tail)[0] != xxhash.xxh64_intdigest(payload):
        return None
    try:
        doc = json.loads(payload)
        if doc["version"] != SNAPSHOT_VERSION:
            return None
        producers = {}
        for pid, epoch, last_timestamp, batches, txn_first_offset in doc["producers"]:
            entry = ProducerEntry(pid, epoch, last_timestamp, txn_first_offset=txn_first_offset)
            entry.batches.extend(BatchMeta(*b) for b in batches)
            producers[pid] = entry
        return producers, [AbortedTxn(*a) for a in doc["aborted"]]
    except (ValueError, KeyError, TypeError):
        return None


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def store_snapshot(directory: Path, offset: int, data: bytes) -> None:
    """Write one snapshot atomically and forget all but the newest few (any thread; a partition
    deleted meanwhile needs none)."""
    try:
        write_atomic(snapshot_path(directory, offset), data)
    except FileNotFoundError:
        log.debug("producer snapshot of %s not written: the partition is gone", directory)
        return
    for old in snapshot_offsets(directory)[:-SNAPSHOTS_KEPT]:
        snapshot_path(directory, old).unlink(missing_ok=True)


def replay(producers: ProducerStateManager, data: bytes, after: int) -> int:
    """Rebuild producer state from stored batches (headers; control records decoded) that end
    after ``after``, as an engine does when it opens a log; returns the offset after the last
    batch seen."""
    last = after
    for position, header in iter_headers(data):
        last = header.next_offset
        if header.next_offset <= after:
            continue
        if header.is_control:
            replay_marker(producers, data, position, header)
        else:
            producers.update((header,))
    return last


def replay_marker(producers: ProducerStateManager, data: bytes, position: int, header: BatchHeader) -> None:
    """Apply a stored control batch: a transaction marker ends its producer's transaction."""
    try:
        record = decode_batch(data, position, verify_crc=False).records[0]
        kind, _ = parse_control_record(record)
    except (ValueError, IndexError):
        return  # a control record of a kind that is not a transaction marker
    producers.complete_txn(header.producer_id, header.producer_epoch, header.base_offset, kind == ControlType.COMMIT)
