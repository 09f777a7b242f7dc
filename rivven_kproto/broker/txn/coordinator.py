"""The transaction coordinator: Kafka's state machine per transactional id, error code for error code.

A coordinator shard run by the coordinator runtime (``broker/coordinator_runtime.py``): every
operation checks the transition against Kafka's table of legal previous states
(``VALID_PREVIOUS``) and returns a ``Result`` whose record is the new :class:`TxnMetadata` (one
JSON entry per transition) and whose effects are what follows once it is logged (write markers,
complete groups, record a commit's decision: ``effects.py``). The runtime appends the record and
only then applies it through :meth:`apply`, the same code that replays the log at load (a failed
write answers COORDINATOR_NOT_AVAILABLE and changes nothing). The coordinator does no other I/O:
the server's flusher fsyncs the log off the event loop.

Ending a transaction is a two-phase commit: log PrepareCommit/PrepareAbort, write a COMMIT/ABORT
marker to every partition of the transaction (the ``WriteMarkers`` effect, run by
``write_markers``; its outcome comes back to :meth:`markers_written`), then log
CompleteCommit/CompleteAbort. A commit's decision is also recorded with its PrepareCommit entry
(``record_decision``, kept by a shared database's log): a leader whose marker has not arrived yet
reads it there, so the commit becomes visible on all of its partitions at once. The completion is
the ``AwaitSync`` effect: run at once, or, with the runner the server registers for
``fsync=always``, held in :attr:`awaiting_sync` until the flusher has made the markers durable
(``take_awaiting``, then ``complete_synced``). Timers are operations too: :meth:`due` and :meth:`retries` make Results that
``runtime.run_each`` runs. A logged commit decision is never turned into an abort.
On start, :meth:`recover` re-writes the markers of every transaction left in a Prepare state,
has the broker flush them, then logs the completions.

Transactions V2 (KIP-890 part 2, Kafka 4.0): see ``epochs.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rivven_kproto.codec.errors import Errors

from ..coordinator_runtime import CoordinatorRuntime, Result
from ..durable.log import DurableLog
from ..faults import fault_point
from .effects import (
    AwaitSync,
    Completed,
    CompleteGroups,
    GroupCompleter,
    GroupsNotCompleted,
    MarkerWriter,
    Partition,
    RecordDecision,
    WriteMarkers,
)
from .epochs import INT16_MAX, MAX_EPOCH, epoch_exhausted, fenced, may_claim, next_epoch
from .index import TxnIndex
from .legacy_log import has_legacy, read_legacy, remove_legacy
from .state import NOTHING_TO_ABORT, VALID_PREVIOUS, TxnMetadata, TxnState, abort_of_nothing
from .state import encode_entry as _encode

log = logging.getLogger(__name__)
T = TypeVar("T")

COMPACT_AFTER_ENTRIES = 10_000
MARKER_WARNING_INTERVAL_MS = 10_000  # how often a transaction whose markers keep failing is warned about


class IllegalTransition(RuntimeError):
    """A transition Kafka's state machine forbids: a bug, never a client's doing."""


@dataclass
class TxnCounters:
    started: int = 0
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0


class TransactionCoordinator:
    def __init__(
        self,
        durable_log: DurableLog,
        allocate_producer_id: Callable[[], int],
        write_markers: MarkerWriter,
        *,
        max_timeout_ms: int = 900_000,
        id_expiration_ms: int = 7 * 24 * 3_600_000,
    ) -> None:
        self.log = durable_log
        # (committed, seconds from Prepare to the logged completion): the metrics' histogram.
        self.completion_observer: Callable[[bool, float], None] | None = None
        self.awaiting_sync: dict[str, TxnMetadata] = {}
        self._appended_at_roll = 0
        self.allocate_producer_id = allocate_producer_id
        self.write_markers = write_markers
        self.complete_groups: GroupCompleter | None = None
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.index = TxnIndex()  # changed by ``apply`` only; its dicts, named for the readers:
        self.txns, self.by_producer, self.in_flight = self.index.txns, self.index.by_producer, self.index.in_flight
        self.unwritten: dict[str, set[Partition]] = {}
        self._marker_warned_ms: dict[str, int] = {}  # when a transaction's failing markers were last warned about
        self.counters = TxnCounters()
        self.runtime: CoordinatorRuntime[TxnMetadata] = CoordinatorRuntime(durable_log, self)
        self.runtime.on(WriteMarkers, self._run_write_markers, then=self.markers_written)
        self.runtime.on(CompleteGroups, self._run_complete_groups, then=self.groups_completed)
        self.runtime.on(RecordDecision, self._run_record_decision)
        self.runtime.on(Completed, self._run_completed)
        self.runtime.on(AwaitSync, lambda effect, now_ms: None,  # complete at once (no sync to wait for)
                        then=lambda effect, _, now_ms: self._completion(effect.txn, now_ms))

    # -- persistence --------------------------------------------------------------------------

    def recover(self, now_ms: int, make_durable: Callable[[], None] = lambda: None) -> None:
        """Replay the log, then finish transactions whose decision was logged: re-write their
        markers, let ``make_durable`` flush them, then log the completions."""
        legacy_dir = getattr(self.log, "directory", None)  # the native log's files only
        state: dict[str, dict[str, object]] = read_legacy(legacy_dir) if legacy_dir is not None else {}
        for txn in sorted((TxnMetadata.from_json(doc) for doc in state.values()), key=lambda t: t.last_update_ms):
            self.apply(txn)  # oldest first: ``txns`` is in the order of last transition
        self.runtime.replay(self.log.open())
        if legacy_dir is not None and has_legacy(legacy_dir):
            self.log.roll(self._snapshot(), now=True)
            remove_legacy(legacy_dir)
        with self.runtime.rerouted(AwaitSync, self.hold_until_synced):
            for txn in list(self.in_flight.values()):
                if txn.state.is_prepare:
                    log.info("completing %s of %s after restart", txn.state.value, txn.transactional_id)
                    self.runtime.run(self._resume(txn), now_ms)
        make_durable()
        self.complete_synced(self.take_awaiting(), now_ms)

    def _snapshot(self) -> list[bytes]:
        return [_encode(txn) for txn in self.txns.values()]

    # -- the shard: one apply for live records and replay ------------------------------------------

    def apply(self, txn: TxnMetadata) -> None:
        """The only change of ``txns``: a transition's record, logged just now or replayed."""
        self.index.apply(txn)

    def encode(self, records: Sequence[TxnMetadata]) -> bytes:
        (txn,) = records  # one entry per transition
        return _encode(txn)

    def decode(self, payload: bytes) -> list[TxnMetadata]:
        return [TxnMetadata.from_json(json.loads(payload))]

    def appended(self, records: Sequence[TxnMetadata]) -> None:
        """Start a new log file from a snapshot every COMPACT_AFTER_ENTRIES entries."""
        if self.log.appended - self._appended_at_roll >= COMPACT_AFTER_ENTRIES:
            self._appended_at_roll = self.log.appended
            try:
                self.log.roll(self._snapshot())
            except OSError:
                log.exception("could not start a new transaction log file; the current one keeps growing")

    def _transition(self, txn: TxnMetadata, response: T, effects: Sequence[object] = ()) -> Result[T]:
        """The operation's result logging ``txn``, checked against Kafka's legal transitions."""
        previous = self.txns.get(txn.transactional_id)
        if previous is not None and previous.state not in VALID_PREVIOUS[txn.state]:
            raise IllegalTransition(f"{txn.transactional_id}: {previous.state.value} -> {txn.state.value}")
        return Result(response, [txn], effects)

    def _run(self, result: Result[T], now_ms: int, unavailable: T) -> T:
        """Run an API's result; a failed log write answers ``unavailable`` (nothing changed)."""
        try:
            return self.runtime.run(result, now_ms)
        except OSError:
            log.exception("transaction log write failed")
            return unavailable

    # -- the APIs -----------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int, now_ms: int
    ) -> tuple[Errors, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch).

        Kafka's TransactionCoordinator.handleInitProducerId: an ongoing transaction is aborted under
        a fencing epoch that is never handed to any client (``last_producer_epoch`` is cleared, so a
        KIP-360 retry of the fenced epoch is PRODUCER_FENCED and a new instance gets one more bump);
        the epoch of any marker is therefore never the epoch a producer later writes batches with.
        """
        if not transactional_id:
            return Errors.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return Errors.INVALID_TRANSACTION_TIMEOUT, -1, -1
        txn = self.txns.get(transactional_id)
        expected = (expected_pid, expected_epoch) if expected_pid != -1 else None
        unavailable = (Errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
        try:  # allocating a producer id may fail too
            result = self._init(transactional_id, txn, timeout_ms, expected, now_ms)
        except OSError:
            log.exception("transaction log write failed")
            return unavailable
        return self._run(result, now_ms, unavailable)

    def _init(
        self, transactional_id: str, txn: TxnMetadata | None, timeout_ms: int, expected: tuple[int, int] | None,
        now_ms: int,
    ) -> Result[tuple[Errors, int, int]]:
        if txn is None:
            fresh = TxnMetadata(transactional_id, self.allocate_producer_id(), 0, timeout_ms, last_update_ms=now_ms)
            return self._transition(fresh, (Errors.NONE, fresh.producer_id, fresh.producer_epoch))
        if txn.state.is_prepare:
            return Result((Errors.CONCURRENT_TRANSACTIONS, -1, -1))
        if expected is not None and not may_claim(txn, *expected):
            return Result((Errors.PRODUCER_FENCED, -1, -1))
        if txn.state is TxnState.ONGOING:
            # Fence the previous instance and abort what it left open; the client retries.
            return self._abort(fenced(txn, now_ms), now_ms, (Errors.CONCURRENT_TRANSACTIONS, -1, -1))
        bumped = next_epoch(txn, expected, self.allocate_producer_id)
        if bumped is None:
            return Result((Errors.PRODUCER_FENCED, -1, -1))
        ready = bumped.evolve(
            state=TxnState.EMPTY, timeout_ms=timeout_ms, partitions=frozenset(), groups=frozenset(),
            last_update_ms=now_ms,
        )
        return self._transition(ready, (Errors.NONE, ready.producer_id, ready.producer_epoch))

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[Errors, TxnMetadata | None]:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return Errors.PRODUCER_FENCED, None
        return Errors.NONE, txn

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[Partition],
        now_ms: int,
        client_txn_version: int = 0,
    ) -> Errors:
        """AddPartitionsToTxn for partitions the caller checked exist; with ``client_txn_version=2``
        the implicit add of a transactions-V2 Produce (KIP-890 part 2)."""
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state.is_prepare:
            return Errors.CONCURRENT_TRANSACTIONS
        if txn.state is TxnState.ONGOING and set(partitions) <= txn.partitions:
            return Errors.NONE
        return self._extend(txn, now_ms, client_txn_version, partitions=txn.partitions | set(partitions))

    def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str, now_ms: int,
        client_txn_version: int = 0,
    ) -> Errors:
        """AddOffsetsToTxn: the group's offsets will be committed or dropped with the transaction
        (with ``client_txn_version=2``, the implicit add of a TxnOffsetCommit v5)."""
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state.is_prepare:
            return Errors.CONCURRENT_TRANSACTIONS
        if txn.state is TxnState.ONGOING and group_id in txn.groups:
            return Errors.NONE
        return self._extend(txn, now_ms, client_txn_version, groups=txn.groups | {group_id})

    def _extend(self, txn: TxnMetadata, now_ms: int, client_txn_version: int, **changes: object) -> Errors:
        starting = txn.state is not TxnState.ONGOING
        if starting:
            changes.setdefault("partitions", txn.partitions)
            changes.setdefault("groups", frozenset())
        updated = txn.evolve(
            state=TxnState.ONGOING, start_ms=now_ms if starting else txn.start_ms, last_update_ms=now_ms,
            client_txn_version=client_txn_version, **changes,
        )
        error = self._run(self._transition(updated, Errors.NONE), now_ms, Errors.COORDINATOR_NOT_AVAILABLE)
        if starting and error is Errors.NONE:
            self.counters.started += 1
        return error

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> Errors:
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        state = txn.state
        if state is TxnState.ONGOING:
            return self._run(self._prepare(txn, commit, now_ms, Errors.NONE, bump=False), now_ms,
                             Errors.COORDINATOR_NOT_AVAILABLE)
        if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return Errors.NONE  # a retry of what already happened
        if state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return Errors.CONCURRENT_TRANSACTIONS
        return abort_of_nothing(txn) if not commit and state in NOTHING_TO_ABORT else Errors.INVALID_TXN_STATE

    def end_txn_v2(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> tuple[Errors, int, int]:
        """EndTxn v5 with transactions V2: (error, producer id, epoch the client goes on with).

        Kafka 4.x's rules (TransactionCoordinator.endTransaction with TV_2): the epoch is bumped
        on every end, so the same epoch means the *next* end, and a retry is recognised by the
        client's epoch being one behind (or, across a producer id rotation, the previous id at
        the exhausted epoch). An abort with nothing added (Empty, or a completed transaction)
        is allowed and bumps the epoch too; a commit of nothing is INVALID_TXN_STATE.
        """
        if not transactional_id:
            return Errors.INVALID_REQUEST, -1, -1
        txn = self.txns.get(transactional_id)
        if txn is None:
            return Errors.INVALID_PRODUCER_ID_MAPPING, -1, -1
        retry_on_overflow = (
            txn.last_producer_id == producer_id and epoch == MAX_EPOCH and txn.producer_epoch == 0
        )
        # A retry only after a V2 bump (a V1 end or InitProducerId also leaves epoch + 1 behind).
        retry_on_bump = txn.is_v2 and txn.producer_id == producer_id and txn.producer_epoch == epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            return Errors.INVALID_PRODUCER_ID_MAPPING, -1, -1
        state = txn.state
        if state is TxnState.ONGOING or state is TxnState.EMPTY:
            valid = epoch == txn.producer_epoch
        elif state.is_prepare:
            valid = retry_on_bump
        else:
            valid = retry_on_bump or retry_on_overflow or epoch == txn.producer_epoch
        if not valid:
            return Errors.PRODUCER_FENCED, -1, -1
        retry = retry_on_bump or retry_on_overflow
        current = (Errors.NONE, txn.producer_id, txn.producer_epoch)
        if state.is_prepare:
            wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return (Errors.CONCURRENT_TRANSACTIONS if state is wanted else Errors.INVALID_TXN_STATE), -1, -1
        if state is TxnState.ONGOING:
            return self._end_v2(txn, commit, now_ms)
        if commit:  # Empty, CompleteCommit, CompleteAbort
            return current if retry and state is TxnState.COMPLETE_COMMIT else (Errors.INVALID_TXN_STATE, -1, -1)
        if retry:
            return current if state is TxnState.COMPLETE_ABORT else (Errors.INVALID_TXN_STATE, -1, -1)
        # Abort with no partition added: Kafka 4.x lets a V2 client end an empty transaction.
        return self._end_v2(txn.evolve(start_ms=now_ms, partitions=frozenset(), groups=frozenset()), False, now_ms)

    def _end_v2(self, txn: TxnMetadata, commit: bool, now_ms: int) -> tuple[Errors, int, int]:
        unavailable = (Errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
        try:  # allocating a producer id may fail too
            prepared = self._prepared(txn, commit, now_ms, bump=True)
        except OSError:
            log.exception("transaction log write failed")
            return unavailable
        if prepared.next_producer_id != -1:
            response = (Errors.NONE, prepared.next_producer_id, 0)
        else:
            response = (Errors.NONE, prepared.producer_id, prepared.producer_epoch)
        return self._run(self._prepare_result(txn, prepared, response), now_ms, unavailable)

    def verify_partition(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> Errors:
        """KIP-890 part 1: a transactional write must belong to the ongoing transaction of the
        producer id and epoch this transactional id was given (a batch naming another id's producer
        would join that producer's transaction: INVALID_PRODUCER_ID_MAPPING, as Kafka's
        verification answers).

        A partition outside it is TRANSACTION_ABORTABLE, as Kafka's verification answers (the
        Produce handler gives clients older than Produce v11 INVALID_TXN_STATE instead)."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if epoch != txn.producer_epoch:
            # Fenced, or an epoch never handed out (a batch of it would fence the real producer's
            # epoch in the partition).
            return Errors.INVALID_PRODUCER_EPOCH
        if txn.state is not TxnState.ONGOING or (topic, partition) not in txn.partitions:
            return Errors.TRANSACTION_ABORTABLE
        return Errors.NONE

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[Partition],
        offsets_partition: Callable[[str], Partition] | None = None,
    ) -> dict[Partition, Errors]:
        """AddPartitionsToTxn v4+ with ``verify_only`` (Kafka's handleVerifyPartitionsInTransaction):
        each partition NONE when in the ongoing transaction, else TRANSACTION_ABORTABLE.

        ``offsets_partition``: a group's offsets partition (its coordinator shard); a group added
        by AddOffsetsToTxn puts it in the transaction, as Kafka's AddOffsetsToTxn adds the group's
        ``__consumer_offsets`` partition (a group coordinator on another broker verifies it)."""
        if not transactional_id:
            return dict.fromkeys(partitions, Errors.INVALID_REQUEST)
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return dict.fromkeys(partitions, error)
        if txn.state.is_prepare:
            return dict.fromkeys(partitions, Errors.CONCURRENT_TRANSACTIONS)
        if txn.state is not TxnState.ONGOING:
            return dict.fromkeys(partitions, Errors.TRANSACTION_ABORTABLE)
        held = set(txn.partitions)
        if offsets_partition is not None:
            held.update(offsets_partition(group_id) for group_id in txn.groups)
        return {p: Errors.NONE if p in held else Errors.TRANSACTION_ABORTABLE for p in partitions}

    def verify_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> Errors:
        """TxnOffsetCommit: the producer's ongoing transaction must hold the group (AddOffsetsToTxn).

        Kafka's verification: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, else INVALID_TXN_STATE.
        """
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state is not TxnState.ONGOING or group_id not in txn.groups:
            return Errors.INVALID_TXN_STATE
        return Errors.NONE

    # -- two-phase commit ---------------------------------------------------------------------

    def _abort(self, txn: TxnMetadata, now_ms: int, response: T) -> Result[T]:
        """Abort a fenced or timed-out transaction; a V2 one also gets the V2 bump (Kafka's
        PrepareEpochFence with TV_2 ends two epochs above the fenced producer's)."""
        return self._prepare(txn, False, now_ms, response, bump=txn.is_v2)

    def _prepare(self, txn: TxnMetadata, commit: bool, now_ms: int, response: T, *, bump: bool) -> Result[T]:
        return self._prepare_result(txn, self._prepared(txn, commit, now_ms, bump=bump), response)

    def _prepared(self, txn: TxnMetadata, commit: bool, now_ms: int, *, bump: bool) -> TxnMetadata:
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump:
            # KIP-890 part 2: the Prepare entry holds the bumped epoch, so the markers carry it.
            next_pid = self.allocate_producer_id() if epoch_exhausted(txn.producer_epoch) else -1
            return txn.evolve(
                state=state, producer_epoch=min(txn.producer_epoch + 1, INT16_MAX),
                last_producer_epoch=txn.producer_epoch, next_producer_id=next_pid, client_txn_version=2,
                last_update_ms=now_ms,
            )
        return txn.evolve(state=state, client_txn_version=0, last_update_ms=now_ms)

    def _prepare_result(self, txn: TxnMetadata, prepared: TxnMetadata, response: T) -> Result[T]:
        """Log the Prepare entry, then (a commit's decision durable with the entry: leaders may
        show the commit before their marker lands) write the markers."""
        effects: list[object] = []
        if prepared.state is TxnState.PREPARE_COMMIT:
            effects.append(RecordDecision(txn.producer_id, txn.producer_epoch))
        effects.append(self._write_markers(prepared, after_prepare=True))
        return self._transition(prepared, response, effects)

    def _write_markers(self, txn: TxnMetadata, *, after_prepare: bool = False) -> WriteMarkers:
        """The markers still to write: all of the transaction's partitions, or those a try left."""
        todo = self.unwritten.get(txn.transactional_id, txn.partitions)
        return WriteMarkers(txn, tuple(sorted(todo)), after_prepare)

    def _resume(self, txn: TxnMetadata) -> Result[None]:
        """Go on with a prepared transaction: write its markers (again), then complete it."""
        return Result(None, effects=[self._write_markers(txn)])

    def _run_write_markers(self, effect: WriteMarkers, now_ms: int) -> set[Partition]:
        if effect.after_prepare:
            fault_point("txn-after-prepare")
        txn = effect.txn
        return self.write_markers(txn.producer_id, txn.producer_epoch, effect.commit, effect.partitions, now_ms)

    def markers_written(self, effect: WriteMarkers, failed: set[Partition], now_ms: int) -> Result[None] | None:
        """The outcome of ``WriteMarkers``: retry the ``failed`` later, or go on to complete."""
        txn = effect.txn
        if failed:
            # The first attempt leaves the markers of partitions other brokers lead unwritten (their
            # leaders are asked): only a retry that still finds some is worth a warning, once per
            # MARKER_WARNING_INTERVAL_MS for each transaction (retries come every fraction of a second).
            retried = txn.transactional_id in self.unwritten
            warned = self._marker_warned_ms.get(txn.transactional_id)
            if retried and (warned is None or now_ms - warned >= MARKER_WARNING_INTERVAL_MS):
                self._marker_warned_ms[txn.transactional_id] = now_ms
                log.warning("%d markers of %s not written yet (%s); retrying", len(failed), txn.transactional_id,
                            sorted(failed)[:4])
            else:
                log.debug("%d markers of %s not written yet; will retry", len(failed), txn.transactional_id)
            self.unwritten[txn.transactional_id] = failed
            return None
        self.unwritten.pop(txn.transactional_id, None)
        self._marker_warned_ms.pop(txn.transactional_id, None)
        return Result(None, effects=[AwaitSync(txn)])

    def hold_until_synced(self, effect: AwaitSync, now_ms: int) -> None:
        """``AwaitSync``'s runner under ``fsync=always``: complete after the next flush."""
        self.awaiting_sync[effect.txn.transactional_id] = effect.txn

    def retry_unwritten(self, now_ms: int) -> None:
        """Other brokers answered the markers asked of them: complete now, not at the next tick."""
        self.runtime.run_each(self.retries(), now_ms)

    def retries(self) -> Iterator[Result[None]]:
        """The operations retrying unwritten markers (prepared transactions not awaiting a sync)."""
        for transactional_id in list(self.unwritten):
            txn = self.txns.get(transactional_id)
            if txn is not None and txn.state.is_prepare and transactional_id not in self.awaiting_sync:
                yield self._resume(txn)

    def take_awaiting(self) -> list[TxnMetadata]:
        """Transactions whose markers are written; complete them once a flush that starts now ends."""
        return list(self.awaiting_sync.values())

    def complete_synced(
        self, synced: Iterable[TxnMetadata], now_ms: int, lost: frozenset[tuple[str, int]] = frozenset()
    ) -> None:
        """The markers of these transactions are durable: log their completion. ``lost``: markers
        ("<topic>-<partition>", producer id) refused because another broker claimed their log
        first, whether appended before this round or while it ran (then the transaction waits
        for the next round, and is not among ``synced``): written again, by the new leader."""
        if lost:
            # Awaiting this round, or still waiting for other leaders' answers (then the lost
            # markers join those: completing once the others answered would leave them unwritten).
            for transactional_id in [*self.awaiting_sync, *self.unwritten]:
                txn = self.txns.get(transactional_id)
                if txn is None or not txn.state.is_prepare:
                    continue
                missing = {tp for tp in txn.partitions if (f"{tp[0]}-{tp[1]}", txn.producer_id) in lost}
                if missing:
                    log.warning("%d markers of %s were lost with partitions another broker took; writing them again",
                                len(missing), transactional_id)
                    self.awaiting_sync.pop(transactional_id, None)
                    self.unwritten[transactional_id] = self.unwritten.get(transactional_id, set()) | missing
        for txn in synced:
            if self.awaiting_sync.get(txn.transactional_id) is txn:
                del self.awaiting_sync[txn.transactional_id]
                if self.txns.get(txn.transactional_id) is txn:
                    self.runtime.follow(self._completion(txn, now_ms), now_ms)

    def _completion(self, txn: TxnMetadata, now_ms: int) -> Result[None]:
        """Every marker is written: complete the transaction's groups first, if it has any."""
        if txn.groups and self.complete_groups is not None:
            return Result(None, effects=[CompleteGroups(txn)])
        return self._complete(txn, now_ms)

    def _run_complete_groups(self, effect: CompleteGroups, now_ms: int) -> bool:
        """True once every group is completed; False while a shard another broker holds is not."""
        txn = effect.txn
        assert self.complete_groups is not None
        try:
            self.complete_groups(txn.producer_id, txn.groups, txn.state is TxnState.PREPARE_COMMIT)
        except GroupsNotCompleted:
            return False
        return True

    def groups_completed(self, effect: CompleteGroups, done: bool, now_ms: int) -> Result[None] | None:
        if not done:
            # Offsets in a group shard another broker holds: its marker is on its way; the
            # completion is retried like an unwritten marker (every partition's is written).
            self.unwritten[effect.txn.transactional_id] = set()
            return None
        return self._complete(effect.txn, now_ms)

    def _complete(self, txn: TxnMetadata, now_ms: int) -> Result[None]:
        """Log CompleteCommit/CompleteAbort (its append may fail: the timer retries)."""
        commit = txn.state is TxnState.PREPARE_COMMIT
        fault_point("txn-before-complete")
        done = txn.evolve(
            state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            partitions=frozenset(),
            groups=frozenset(),
            last_update_ms=now_ms,
        )
        if txn.next_producer_id != -1:  # a V2 end at an exhausted epoch: on to a new producer id
            done = done.evolve(
                producer_id=txn.next_producer_id, producer_epoch=0, last_producer_id=txn.producer_id,
                next_producer_id=-1,
            )
        effects: list[object] = [RecordDecision(txn.producer_id, None)] if commit else []  # every marker is written
        effects.append(Completed(commit, max(now_ms - txn.last_update_ms, 0) / 1000))
        return self._transition(done, None, effects)

    def _run_record_decision(self, effect: RecordDecision, now_ms: int) -> None:
        self.log.record_decision(effect.producer_id, effect.producer_epoch)

    def _run_completed(self, effect: Completed, now_ms: int) -> None:
        if effect.commit:
            self.counters.committed += 1
        else:
            self.counters.aborted += 1
        if self.completion_observer is not None:
            self.completion_observer(effect.commit, effect.seconds)

    # -- time ---------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """The timer: run :meth:`due`'s operations (a failed write is retried at the next tick)."""
        self.runtime.run_each(self.due(now_ms), now_ms)

    def due(self, now_ms: int) -> Iterator[Result[None]]:
        """The operations due at ``now_ms``, made lazily (each after the one before it ran): abort a
        timed-out transaction (fencing its producer), resume a prepared one, expire an idle id.

        The scan is Kafka's (its coordinator aborts timed-out transactions and expires ids from
        periodic scans too) but walks only what can be due: the transactions in flight, and the
        idle ids from the oldest transition on, up to the first not expired yet."""
        for txn in list(self.in_flight.values()):
            if txn.state is TxnState.ONGOING and now_ms - txn.start_ms > txn.timeout_ms:
                log.info("aborting transaction %s: timed out after %d ms", txn.transactional_id, txn.timeout_ms)
                self.counters.timed_out += 1
                yield self._abort(fenced(txn, now_ms), now_ms, None)
            elif txn.state.is_prepare and txn.transactional_id not in self.awaiting_sync:
                yield self._resume(txn)
        for txn in self.index.expired(now_ms, self.id_expiration_ms):
            yield self._transition(txn.evolve(state=TxnState.DEAD, last_update_ms=now_ms), None)

    @property
    def active(self) -> int:
        """Transactions in flight: Ongoing, PrepareCommit or PrepareAbort (the design's definition)."""
        return len(self.in_flight)
