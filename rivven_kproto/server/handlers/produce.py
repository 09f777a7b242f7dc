"""Produce (0): v3-12 served; v0-2 are decoded only to answer UNSUPPORTED_VERSION, as Kafka 4 does.

Each partition's data must be exactly one RecordBatch v2 (Kafka's rule for v3+); the log validates
and appends it as bytes. A topic whose ``compression.type`` is not ``producer`` gets the batch
recompressed, as Kafka does. Idempotent batches are checked against the partition's producer
state by the log (a retried duplicate is answered with its original offsets and not written,
once the original is durable).
A transactional batch is accepted only for a partition the coordinator has in that producer's
ongoing transaction (KIP-890 part 1), else TRANSACTION_ABORTABLE (v11+) or INVALID_TXN_STATE.
With transactions V2 (v12 on a broker whose ``transaction.version`` is 2, KIP-890 part 2) the
leader adds the partition to the transaction itself, as Kafka 4's leader does through its
AddPartitionsToTxnManager (here the coordinator is in the same process): a stale epoch is then
INVALID_PRODUCER_EPOCH (the coordinator's PRODUCER_FENCED, translated as Kafka does), and
CONCURRENT_TRANSACTIONS or COORDINATOR_NOT_AVAILABLE become NOT_ENOUGH_REPLICAS (retriable without
a metadata refresh, Kafka's choice). In a cluster of brokers on one PostgreSQL database a leader
that does not coordinate asks the coordinator first (``_txn_verification``, in ``prepare``) and checks its
verdict here.

Every record is validated as Kafka's LogValidator does. :func:`prepare` does that work (and any
recompression) before :func:`handle`, on a worker thread when a batch is compressed, large, to be
recompressed or the compiled scanner is missing, so one client's batch never stalls the event loop.

Authorization (the table's row, as Kafka): a request carrying transactional records needs a
transactional id the client may Write, else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (a transactional id with plain records is not checked);
then Write on each topic, else that topic's partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from rivven_kproto.broker.log.validation import RecordCheck, RecordValidationError, prepare_client_records
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.topics import INTERNAL_TOPICS
from rivven_kproto.broker.txn.coordinator import TransactionCoordinator
from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from rivven_kproto.codec.records.batch import BatchFormatError, BatchHeader, iter_headers, parse_header
from rivven_kproto.codec.records.scan import COMPILED

from ..context import NoResponse, Partition, PartitionKey, RequestContext
from ..delayed import Pending, after_claims_checked
from ..log_limits import RateLimitedLog
from ..routes import Leader, Shape
from ._txn_verification import verify_with_coordinator
from .txn_errors import PRODUCE_ABORTABLE, PRODUCE_V2, abortable_for_version, client_txn_version

API_KEY = 0
TRANSACTIONAL_ID, TOPIC = rule(API_KEY).check("transactional_id"), rule(API_KEY).check("topic")
DECODE_INLINE = True  # the bulk of a large Produce is record bytes, validated by ``prepare``
MIN_SERVED_VERSION = 3
log = logging.getLogger(__name__)
refusals = RateLimitedLog(log)  # a client chooses how many partitions and batches it sends

_TOPIC_COMPRESSION = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
# Uncompressed batches up to this size are scanned on the event loop (compiled: microseconds).
INLINE_SCAN_MAX_BYTES = 64 * 1024

Preparation = Callable[[], RecordCheck]


async def prepare(ctx: RequestContext, request: ProduceRequest, limiter: trio.CapacityLimiter) -> None:
    """Validate (and recompress) the request's batches into ``ctx.prepared``; heavy ones off the loop.

    Anything wrong before the record walk (unknown partition, several batches, ...) is left for
    :func:`handle` to answer, in Kafka's order. First, on a leader that does not coordinate the
    producer's transactional id, the coordinator's word on first transactional batches
    (``ctx.txn_verdicts``).
    """
    if request.transactional_id is not None and not ctx.broker.coordinates(request.transactional_id):
        await verify_with_coordinator(ctx.broker, ctx, request, ctx.api_version)
    offloaded: list[tuple[PartitionKey, Preparation]] = []
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            job = _preparation(ctx, topic_data.name, data)
            if job is None:
                continue
            key, preparation, heavy = job
            if heavy:
                offloaded.append((key, preparation))
            else:
                ctx.prepared[key] = _run(preparation)
    if offloaded:
        results = await trio.to_thread.run_sync(lambda: [_run(p) for _, p in offloaded], limiter=limiter)
        ctx.prepared.update((key, result) for (key, _), result in zip(offloaded, results, strict=True))


def _preparation(
    ctx: RequestContext, topic: str, data: PartitionProduceData
) -> tuple[PartitionKey, Preparation, bool] | None:
    if topic in INTERNAL_TOPICS or not ctx.permits(TOPIC, topic):
        return None  # refused by handle() anyway: no records are walked (or decompressed) for it
    try:
        config = ctx.broker.partition(topic, data.index).config
        records = _single_batch(data.records)
        header = parse_header(records)
        codec = _TOPIC_COMPRESSION.get(ctx.broker.topic(topic).compression_type)
    except (KafkaError, ValueError):
        return None
    where = f" {topic}-{data.index}"
    heavy = (
        not COMPILED
        or header.compression != Compression.NONE
        or (codec is not None and codec != header.compression)
        or len(records) > INLINE_SCAN_MAX_BYTES
    )
    return (topic, data.index), lambda: prepare_client_records(records, config, codec, where), heavy


def _run(preparation: Preparation) -> RecordCheck | KafkaError:
    try:
        return preparation()
    except KafkaError as exc:
        return exc
    except ValueError as exc:
        return KafkaError(Errors.CORRUPT_MESSAGE, str(exc))


def handle(ctx: RequestContext, request: ProduceRequest, version: int) -> ProduceResponse | NoResponse | Pending:
    response = answer(ctx, request, version)
    ctx.sync_before_answer = request.acks != 0
    if request.acks == 0:
        return NoResponse(response)
    doubts = _sequence_doubts(ctx, response)
    return _checked_first(ctx, response, doubts) if doubts else response


def _sequence_doubts(ctx: RequestContext, response: ProduceResponse) -> dict[PartitionKey, Partition]:
    """On a cluster, the partitions answered OUT_OF_ORDER_SEQUENCE_NUMBER, with the log that
    answered: that log's producer state may be stale, another broker having claimed the partition
    and written the producer's next batches before this one's heartbeat let go of it."""
    if ctx.broker.claims.bound_s is None:
        return {}
    doubts = {}
    for topic in response.responses:
        for answered in topic.partition_responses:
            if answered.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
                try:
                    doubts[(topic.name, answered.index)] = ctx.broker.partition(topic.name, answered.index)
                except KafkaError:
                    continue
    return doubts


def _checked_first(ctx: RequestContext, response: ProduceResponse, doubts: dict[PartitionKey, Partition]) -> Pending:
    """OUT_OF_ORDER_SEQUENCE_NUMBER is fatal to an idempotent producer (verify-eos seed 77: a
    broker checked a batch against the state it had before another broker led the partition), so
    on a cluster it waits until a heartbeat that started after the request checked these
    partitions' claims in the store (or ``HEARTBEAT_HOLD_MS``): a partition this broker lost, or
    read again from the store, answers NOT_LEADER_OR_FOLLOWER (the client retries with the leader
    it finds); one still led by the same log keeps its answer."""
    def settled(now_ms: int) -> ProduceResponse:
        for topic in response.responses:
            topic.partition_responses = [
                error_partition(answered.index, Errors.NOT_LEADER_OR_FOLLOWER,
                                f"{topic.name}-{answered.index}: this broker's state of it was stale")
                if (topic.name, answered.index) in doubts and not _still_led(ctx, topic.name, answered.index,
                                                                            doubts[(topic.name, answered.index)])
                else answered
                for answered in topic.partition_responses
            ]
        return response

    return after_claims_checked(ctx.broker, doubts, ctx.now_ms, settled)


def _still_led(ctx: RequestContext, topic: str, index: int, answered_by: Partition) -> bool:
    try:
        current = ctx.broker.partition(topic, index)
    except KafkaError:
        return False
    return current is answered_by and not current.fenced


def answer(ctx: RequestContext, request: ProduceRequest, version: int) -> ProduceResponse:
    """The response Kafka would send (also built for acks=0, whose errors are only logged)."""
    if version >= MIN_SERVED_VERSION and has_transactional_records(request):
        # Kafka: transactional records need a transactional id the client may write, authorizer
        # or not; without one they could join whichever producer's transaction they name.
        if request.transactional_id is None:
            return _refuse_all(request, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        refused = ctx.refusal(TRANSACTIONAL_ID, request.transactional_id)
        if refused is not None:
            return _refuse_all(request, refused)
    responses = []
    for topic_data in request.topic_data:
        partitions = [
            _produce_partition(ctx, request, version, topic_data.name, data) for data in topic_data.partition_data
        ]
        responses.append(TopicProduceResponse(name=topic_data.name, partition_responses=partitions))
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def has_transactional_records(request: ProduceRequest) -> bool:
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            try:
                if parse_header(data.records or b"").is_transactional:
                    return True
            except (KafkaError, ValueError, BatchFormatError):
                continue  # answered as corrupt by the partition's own checks
    return False


def _refuse_all(request: ProduceRequest, error: Errors) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(name=topic_data.name,
                                 partition_responses=[error_partition(data.index, error) for data in topic_data.partition_data])
            for topic_data in request.topic_data
        ],
        throttle_time_ms=0,
    )


def on_fenced(response: ProduceResponse, fenced: list[Partition]) -> ProduceResponse:
    """Partitions another broker claimed before this request's batch was committed: the commit
    left them out (nothing of theirs was written), so they answer NOT_LEADER_OR_FOLLOWER, as Kafka
    answers a produce whose leader changed while it waited for acks; the other partitions' answers
    stand. (Closing the connection instead left librdkafka unsure of every batch in the request,
    "possibly persisted", and an idempotent producer later failed on a sequence desync: seed 17.)"""
    moved = {log_.name for log_ in fenced}
    for topic in response.responses:
        topic.partition_responses = [
            error_partition(answer.index, Errors.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{answer.index} moved to another broker")
            if answer.error_code == Errors.NONE and f"{topic.name}-{answer.index}" in moved else answer
            for answer in topic.partition_responses
        ]
    return response


def error_partition(
    index: int, error: Errors, message: str | None = None, record_errors: list[tuple[int, str]] | None = None
) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index, error_code=error, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        error_message=message,
        record_errors=[
            BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=text) for i, text in record_errors or ()
        ],
    )


def _produce_partition(
    ctx: RequestContext, request: ProduceRequest, version: int, topic: str, data: PartitionProduceData
) -> PartitionProduceResponse:
    if version < MIN_SERVED_VERSION:
        return error_partition(data.index, Errors.UNSUPPORTED_VERSION, "Produce v0-2 (message format v0/v1) is not supported")
    if request.acks not in (-1, 0, 1):
        return error_partition(data.index, Errors.INVALID_REQUIRED_ACKS)
    if topic in INTERNAL_TOPICS:
        return error_partition(data.index, Errors.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    refused = ctx.refusal(TOPIC, topic)
    if refused is not None:
        return error_partition(data.index, refused)
    try:
        log_ = ctx.broker.partition(topic, data.index)
        records = _single_batch(data.records)
        header = parse_header(records)
        if header.is_transactional:
            coordinator = _coordinator_of(ctx, request, header)
            if coordinator is not None:
                _join_transaction(ctx, coordinator, request, version, topic, data.index, header)
            else:
                _check_verdict(ctx, version, topic, data.index, header, log_)
        prepared = ctx.prepared.get((topic, data.index))
        if prepared is None:
            codec = _TOPIC_COMPRESSION.get(ctx.broker.topic(topic).compression_type)
            prepared = prepare_client_records(records, log_.config, codec, f" {topic}-{data.index}")
        if isinstance(prepared, KafkaError):
            raise prepared
        info = log_.append(prepared.data, ctx.now_ms, record_check=prepared)
    except RecordValidationError as exc:
        refusals.info("records", "rejecting records for %s-%d: %s", topic, data.index, exc.message)
        return error_partition(data.index, exc.error, exc.message, exc.record_errors)
    except KafkaError as exc:
        return error_partition(data.index, exc.error, exc.message)
    except (BatchFormatError, ValueError) as exc:
        refusals.info("records", "rejecting a corrupt batch for %s-%d: %s", topic, data.index, exc)
        return error_partition(data.index, Errors.CORRUPT_MESSAGE, str(exc))
    if not info.duplicate:
        ctx.appended = True
        ctx.touched.append(log_)
    elif info.last_offset >= log_.recovery_point:
        # A retry of a batch whose first copy is not durable yet (its commit or fsync may be under
        # way for another request): answered, like the first copy, only once that is durable.
        ctx.touched.append(log_)
    return PartitionProduceResponse(
        index=data.index,
        error_code=Errors.NONE,
        base_offset=info.base_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
        error_message=None,
    )


_V2_ADD_ERRORS = {
    Errors.PRODUCER_FENCED: Errors.INVALID_PRODUCER_EPOCH,
    Errors.CONCURRENT_TRANSACTIONS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.NOT_ENOUGH_REPLICAS,
}


def _coordinator_of(ctx: RequestContext, request: ProduceRequest, header: BatchHeader) -> TransactionCoordinator | None:
    """The producer's transaction coordinator when this broker is it (None: ask it, see
    _txn_verification). Transactional records always come with a transactional id (``answer``)."""
    assert request.transactional_id is not None
    return ctx.broker.txn_coordinator(request.transactional_id)


def _join_transaction(
    ctx: RequestContext, txn: TransactionCoordinator, request: ProduceRequest, version: int, topic: str, partition: int,
    header: BatchHeader,
) -> None:
    """Transactions V2: add the partition to the producer's transaction; V1: verify it is in it."""
    v2 = client_txn_version(ctx.config.transaction_version, version, PRODUCE_V2) >= 2
    if v2 and request.transactional_id is not None:
        error = txn.add_partitions(
            request.transactional_id, header.producer_id, header.producer_epoch, [(topic, partition)], ctx.now_ms,
            client_txn_version=2,
        )
        if error != Errors.NONE:
            raise KafkaError(_V2_ADD_ERRORS.get(error, error), f"could not add {topic}-{partition} to the transaction")
        return
    assert request.transactional_id is not None
    verified = txn.verify_partition(request.transactional_id, header.producer_id, header.producer_epoch, topic,
                                    partition)
    if verified != Errors.NONE:
        raise KafkaError(
            abortable_for_version(verified, version, PRODUCE_ABORTABLE),
            f"{topic}-{partition} is not in an ongoing transaction of this producer",
        )


def _check_verdict(
    ctx: RequestContext, version: int, topic: str, partition: int, header: BatchHeader, log_: Partition
) -> None:
    """A leader that does not coordinate: the coordinator's verdict on this producer's first
    transactional batch here (asked for before the handler ran), still valid if no marker of the
    producer landed since. No verdict: the producer's transaction is already open here."""
    verdict = ctx.txn_verdicts.get((topic, partition))
    if verdict is None:
        return
    if verdict.error != Errors.NONE:
        error = verdict.error
    elif log_.producers.still_verified(header.producer_id, verdict.guard):
        log_.producers.verified_ids[header.producer_id] = verdict.transactional_id
        return
    else:
        error = Errors.INVALID_TXN_STATE  # the transaction ended while the coordinator was asked
    raise KafkaError(
        abortable_for_version(error, version, PRODUCE_ABORTABLE),
        f"the coordinator did not confirm {topic}-{partition} in an ongoing transaction of this producer",
    )


def _single_batch(records: bytes | None) -> bytes:
    """Kafka: produce v3+ carries exactly one record batch per partition."""
    if not records:
        raise KafkaError(Errors.INVALID_RECORD, "Produce request carries no record batch")
    batches = list(iter_headers(records))
    if len(batches) != 1 or batches[0][1].size != len(records):
        raise KafkaError(
            Errors.INVALID_RECORD,
            f"Produce requests with version 3+ must contain exactly one record batch, got {len(batches)}",
        )
    return records


ROUTE = Leader(Shape(  # partitions another broker leads go to it (a client with a stale view)
    "topic_data", "name", "partition_data", "index", ProduceResponse, "responses", "name", "partition_responses",
    "index", lambda name, parts: TopicProduceResponse(name=name, partition_responses=parts), error_partition, TOPIC))
