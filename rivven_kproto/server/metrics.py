"""The broker's Prometheus metrics (prometheus_client's registry and text format).

Two kinds: what the server counts as it goes (requests, latency, bytes, connections,
authentication failures, event-loop lag), and what is read from the broker's state at scrape time
(the design's transaction and idempotence metrics, partitions, groups), so a scrape never takes a
lock and costs nothing between scrapes. Scrapes run on the event loop, between requests: every
series is collected at once (one consistent snapshot), then formatted a few families at a time
with a checkpoint between, so a large exposition never holds the loop for long. A rendering is
reused by the scrapes that follow it for up to 100 times as long as it took (``max_age_ms``), so
a scraper polling every 100 ms costs the loop about 1% however many series there are; it is
gzipped once for the scrapers that accept it (Prometheus does), about a fifth of the bytes to send.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import zlib
from collections.abc import Iterable, Iterator

import trio
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.groups.group import GroupState
from rivven_kproto.broker.txn.coordinator import TxnCounters
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.schema import REQUESTS, Message
from rivven_kproto.server.request_metrics import RequestSeries

from .share_metrics import share_group_families

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
# The queue and send phases are short unless something is wrong: decades are enough, and keep a
# scrape small (every bucket of every API is a line, and scraping runs on the event loop).
PHASE_BUCKETS = (0.0001, 0.001, 0.01, 0.1, 1.0)
# A rendering is reused for this many times as long as it held the loop, at most MAX_AGE_CAP_S.
REUSE_FACTOR = 100
MAX_AGE_CAP_S = 5.0
# Samples formatted between two checkpoints of the event loop.
SAMPLES_PER_SLICE = 500
# Bytes gzipped between two checkpoints (about 1 ms at level 1).
GZIP_SLICE = 128 * 1024
# Pinned answers whose error codes are remembered (beyond that they are walked each time).
MAX_PINNED = 1024

# No ``_created`` series (one per counter and histogram child): they double the scrape for a
# timestamp Prometheus does not need.
disable_created_metrics()


def api_name(api_key: int) -> str:
    request = REQUESTS.get(api_key)
    return request.__name__.removesuffix("Request") if request is not None else str(api_key)


class BrokerMetrics:
    """One broker's registry; ``broker`` is set once recovery is done (``ready`` follows)."""

    def __init__(self, per_partition: bool = True, max_age_ms: int = -1) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.max_age_ms = max_age_ms
        self._rendered: tuple[float, float, bytes] | None = None  # (when, loop seconds it took, body)
        self._gzipped: bytes | None = None  # that body, gzipped once asked for
        self._render_lock = trio.Lock()
        self.broker: Broker | None = None
        self.ready = False
        r = self.registry
        # Requests by API and version, their durations and phases: updated on the loop (request_metrics.py).
        self.request_series = RequestSeries(LATENCY_BUCKETS, PHASE_BUCKETS, api_name)
        r.register(self.request_series)
        self.request_errors = Counter(
            "rivven_request_errors", "Error codes in responses (top level and per partition), by API and error.",
            ["api", "error"], registry=r,
        )
        self.forwarded_partitions = Counter(
            "rivven_forwarded_partitions", "Partitions of Produce, Fetch and ListOffsets requests this broker sent on "
            "to their leader (a client with a stale view of the leaders), by API.", ["api"], registry=r,
        )
        self.bytes_received = Counter("rivven_bytes_received", "Bytes read from client connections.", registry=r)
        self.bytes_sent = Counter("rivven_bytes_sent", "Bytes written to client connections.", registry=r)
        self.bytes_sent_zero_copy = Counter(
            "rivven_bytes_sent_zero_copy", "Of rivven_bytes_sent, record bytes the kernel copied from segment "
            "files to the socket (sendfile: plaintext Fetch responses).", registry=r)
        self.connections = Gauge("rivven_connections", "Open client connections, by listener.", ["listener"], registry=r)
        self.connections_opened = Counter("rivven_connections_opened", "Connections accepted, by listener.",
                                          ["listener"], registry=r)
        self.connections_closed = Counter("rivven_connections_closed", "Connections closed, by listener.",
                                          ["listener"], registry=r)
        self.authentication_failures = Counter(
            "rivven_authentication_failures", "Failed SASL logins and refused TLS clients, by listener and mechanism.",
            ["listener", "mechanism"], registry=r,
        )
        self.fsync_seconds = Histogram(
            "rivven_fsync_duration_seconds", "One flush round on worker threads (every dirty segment, the "
            "coordinators' logs, then the queued file work).", buckets=LATENCY_BUCKETS, registry=r,
        )
        self.fsync_partitions = Counter("rivven_fsync_partitions", "Partition logs fsynced.", registry=r)
        self.fsync_coordinator_logs = Counter(
            "rivven_fsync_coordinator_logs", "Transaction and group coordinator log syncs, by coordinator.",
            ["coordinator"], registry=r,
        )
        self.log_fsync_seconds = Histogram(
            "rivven_log_fsync_duration_seconds", "One log's fsync within a flush round, by log kind (segment: a "
            "partition's files; txn, groups: the coordinators' logs).", ["log"], buckets=LATENCY_BUCKETS, registry=r,
        )
        self.file_jobs = Counter(
            "rivven_file_jobs", "Blocking file work run off the event loop (producer snapshots, checkpoints, "
            "segment and partition deletions, coordinator log snapshots).", registry=r,
        )
        self.transaction_completion_seconds = Histogram(
            "rivven_transaction_completion_seconds", "From a transaction's PrepareCommit/PrepareAbort to its "
            "completion being logged (markers written, and durable under fsync=always), by result.",
            ["result"], buckets=LATENCY_BUCKETS, registry=r,
        )
        self.recovery_seconds = Gauge("rivven_recovery_seconds", "How long opening and recovering the data took.",
                                      registry=r)
        self.event_loop_lag = Histogram(
            "rivven_event_loop_lag_seconds", "How late a periodic tick of the event loop woke up.",
            buckets=LAG_BUCKETS, registry=r,
        )
        r.register(_StateCollector(self, per_partition))
        self._pinned_errors: dict[int, tuple[Message, tuple[int, ...]]] = {}

    def exposition(self) -> bytes:
        """A fresh rendering, in one go (tests, tools)."""
        return generate_latest(self.registry)

    async def scrape(self, gzipped: bool = False) -> bytes:
        """The exposition for ``GET /metrics``: a recent enough rendering, or a new one; gzipped
        (as Prometheus asks for it) once per rendering, so reusing it sends a fifth of the bytes."""
        async with self._render_lock:  # concurrent scrapes share one rendering
            now = time.monotonic()
            if self._rendered is None or now - self._rendered[0] > self._max_age(self._rendered[1]):
                took, body = await self._render()
                self._rendered, self._gzipped = (now, took, body), None
            body = self._rendered[2]
            if not gzipped:
                return body
            if self._gzipped is None:
                self._gzipped = await _gzip(body)
            return self._gzipped

    def _max_age(self, took: float) -> float:
        if self.max_age_ms >= 0:
            return self.max_age_ms / 1000
        return min(MAX_AGE_CAP_S, REUSE_FACTOR * took)

    async def _render(self) -> tuple[float, bytes]:
        """(seconds the loop spent, body): collect everything, then format slice by slice."""
        started = time.perf_counter()
        families = list(self.registry.collect())
        took = time.perf_counter() - started
        parts: list[bytes] = []
        for chunk in _slices(families):
            await trio.lowlevel.checkpoint()
            started = time.perf_counter()
            parts.append(generate_latest(_Collected(chunk)))
            took += time.perf_counter() - started
        return took, b"".join(parts)

    def observe_queue(self, api_key: int, seconds: float) -> None:
        self.request_series.api(api_key).queue_seconds.observe(seconds)

    def observe_send(self, api_key: int, seconds: float) -> None:
        self.request_series.api(api_key).send_seconds.observe(seconds)

    def observe_forwarded(self, api_key: int, partitions: int) -> None:
        self.forwarded_partitions.labels(api_name(api_key)).inc(partitions)

    def observe_transaction(self, committed: bool, seconds: float) -> None:
        self.transaction_completion_seconds.labels("commit" if committed else "abort").observe(seconds)

    def observe_request(self, api_key: int, seconds: float, response: object, version: int = -1) -> None:
        series = self.request_series.api(api_key)
        series.requests += 1
        by_version = self.request_series.version(api_key, version)
        by_version.requests += 1
        by_version.duration_seconds.observe(seconds)
        for code in self._error_codes(response):
            self.request_errors.labels(series.api, Errors.for_code(code).name).inc()

    def _error_codes(self, response: object) -> Iterable[int]:
        """A pinned (shared, never changed) answer's error codes are walked once, not per request."""
        if not (isinstance(response, Message) and response.pinned):
            return error_codes(response)
        known = self._pinned_errors.get(id(response))
        if known is None or known[0] is not response:
            codes = tuple(error_codes(response))
            if len(self._pinned_errors) < MAX_PINNED:  # a handful in practice (ApiVersions per version)
                self._pinned_errors[id(response)] = (response, codes)  # holding it keeps its id unique
            return codes
        return known[1]


async def _gzip(body: bytes) -> bytes:
    """``body`` gzipped (level 1: fast, about a fifth of the size), ``GZIP_SLICE`` bytes between
    checkpoints so a large exposition does not hold the loop."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip header and trailer
    parts = []
    for start in range(0, len(body), GZIP_SLICE):
        if start:
            await trio.lowlevel.checkpoint()
        parts.append(packer.compress(body[start:start + GZIP_SLICE]))
    parts.append(packer.flush())
    return b"".join(parts)


class _Collected(Collector):
    """Families already collected, for ``generate_latest`` to format."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _slices(families: list[Metric]) -> Iterator[list[Metric]]:
    """Runs of whole families of about ``SAMPLES_PER_SLICE`` samples (a larger family alone)."""
    chunk: list[Metric] = []
    size = 0
    for family in families:
        chunk.append(family)
        size += len(family.samples)
        if size >= SAMPLES_PER_SLICE:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def error_codes(response: object) -> Iterator[int]:
    """Every non-zero ``error_code`` in a response, at any depth (per topic, per partition)."""
    if not dataclasses.is_dataclass(response):
        return
    for name in _walk_fields(type(response)):  # type: ignore[arg-type]
        value = getattr(response, name)
        if name == "error_code":
            if value:
                yield value
        elif isinstance(value, list):
            for item in value:
                yield from error_codes(item)
        else:
            yield from error_codes(value)


@functools.cache
def _walk_fields(cls: type) -> tuple[str, ...]:
    """The fields worth walking: error codes, nested structs and arrays (not bytes or records)."""
    names = []
    for field in dataclasses.fields(cls):
        if field.name == "error_code" or "Array" in str(field.type) or "list[" in str(field.type) or (
            isinstance(field.type, str) and field.type[:1].isupper() and field.type not in ("Records", "UUID")
        ):
            names.append(field.name)
    return tuple(names)


class _StateCollector(Collector):
    """Metrics read from the broker's state when scraped."""

    def __init__(self, metrics: BrokerMetrics, per_partition: bool) -> None:
        self.metrics = metrics
        self.per_partition = per_partition

    def collect(self) -> Iterator[Metric]:
        broker = self.metrics.broker
        if broker is None:
            return
        yield from self._transactions(broker)
        yield from self._partitions(broker)
        yield from self._groups(broker)
        yield from share_group_families(broker)

    @staticmethod
    def _transactions(broker: Broker) -> Iterator[Metric]:
        every = [txn.counters for txn in broker.txn_coordinators()]  # of the shards served now
        counters = TxnCounters(*(sum(getattr(c, name) for c in every) for name in
                                 ("started", "committed", "aborted", "timed_out")))
        for name, value, text in (
            ("rivven_transactions_started", counters.started, "Transactions begun (first partition or group added)."),
            ("rivven_transactions_committed", counters.committed, "Transactions completed as committed."),
            ("rivven_transactions_aborted", counters.aborted, "Transactions completed as aborted (client or coordinator)."),
            ("rivven_transactions_timed_out", counters.timed_out, "Transactions aborted by the coordinator's timeout."),
            ("rivven_idempotent_duplicates", sum(p.producers.duplicates for p in broker.all_partitions()),
             "Batches answered as duplicates from the producer state's last five batches."),
        ):
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily("rivven_transactions_active", "Transactions Ongoing, PrepareCommit or PrepareAbort.",
                                value=sum(txn.active for txn in broker.txn_coordinators()))
        # Distinct producer ids (one producer writing to eight partitions is one producer).
        yield GaugeMetricFamily("rivven_idempotent_producers_active", "Producer ids with state on any partition.",
                                value=len({pid for p in broker.all_partitions() for pid in p.producers.producers}))
        yield CounterMetricFamily("rivven_transaction_markers_written", "COMMIT/ABORT markers written to partitions.",
                                  value=sum(log.markers_written for log in broker.all_partitions()))
        oldest = GaugeMetricFamily("rivven_transaction_oldest_open_age_seconds",
                                   "Age of the oldest open transaction writing to each partition.", labels=["topic", "partition"])
        now_ms = time.time() * 1000
        starts: dict[tuple[str, int], int] = {}
        for txn in (t for coordinator in broker.txn_coordinators() for t in coordinator.txns.values()):
            if txn.state is TxnState.ONGOING or txn.state.is_prepare:
                for key in txn.partitions:
                    starts[key] = min(starts.get(key, txn.start_ms), txn.start_ms)
        for (topic, partition), start_ms in sorted(starts.items()):
            oldest.add_metric([topic, str(partition)], max(0.0, (now_ms - start_ms) / 1000))
        yield oldest

    def _partitions(self, broker: Broker) -> Iterator[Metric]:
        yield GaugeMetricFamily("rivven_topics", "Topics.", value=len(broker.topics))
        messages = CounterMetricFamily("rivven_topic_messages_appended", "Client records appended (duplicates not "
                                       "counted) since start.", labels=["topic"])
        volume = CounterMetricFamily("rivven_topic_bytes_appended", "Client batch bytes appended since start.",
                                     labels=["topic"])
        for topic in broker.topics.values():
            messages.add_metric([topic.name], sum(log.appended_messages for log in topic.led()))
            volume.add_metric([topic.name], sum(log.appended_bytes for log in topic.led()))
        yield messages
        yield volume
        if not self.per_partition:
            return
        labels = ["topic", "partition"]
        families = {
            "hw": GaugeMetricFamily("rivven_partition_high_watermark", "High watermark (log end offset).", labels=labels),
            "lso": GaugeMetricFamily("rivven_partition_last_stable_offset", "Last stable offset.", labels=labels),
            "start": GaugeMetricFamily("rivven_partition_log_start_offset", "Log start offset.", labels=labels),
            "size": GaugeMetricFamily("rivven_partition_log_size_bytes", "Bytes in the partition's segments.", labels=labels),
            "segments": GaugeMetricFamily("rivven_partition_log_segments", "Segments of the partition.", labels=labels),
        }
        for topic in broker.topics.values():
            for index, log in enumerate(topic.partitions):
                if log is None or log.closed:
                    continue
                key = [topic.name, str(index)]
                families["hw"].add_metric(key, log.log_end_offset)
                families["lso"].add_metric(key, log.last_stable_offset)
                families["start"].add_metric(key, log.log_start_offset)
                families["size"].add_metric(key, log.size_bytes)
                families["segments"].add_metric(key, len(log.segment_base_offsets))
        yield from families.values()

    def _groups(self, broker: Broker) -> Iterator[Metric]:
        coordinators = broker.group_coordinators()
        by_state = GaugeMetricFamily("rivven_groups", "Consumer groups by state.", labels=["state"])
        counts = {state.value: 0 for state in GroupState}
        for group in (g for c in coordinators for g in c.groups.values()):
            counts[group.state.value] += 1
        for consumer_group in (g for c in coordinators for g in c.consumer_groups.values()):  # KIP-848: Assigning, Reconciling, ...
            counts[consumer_group.state] = counts.get(consumer_group.state, 0) + 1
        for state, count in counts.items():
            by_state.add_metric([state], count)
        yield by_state
        members = GaugeMetricFamily("rivven_group_members", "Members of each group.", labels=["group"])
        generation = GaugeMetricFamily("rivven_group_generation", "Generation of each group (a KIP-848 group's epoch).",
                                       labels=["group"])
        rebalances = CounterMetricFamily("rivven_group_rebalances", "Rebalances begun (PreparingRebalance) since start.",
                                         labels=["group"])
        for group in (g for c in coordinators for g in c.groups.values()):
            members.add_metric([group.group_id], len(group.members))
            generation.add_metric([group.group_id], group.generation_id)
            rebalances.add_metric([group.group_id], group.rebalances)
        for consumer_group in (g for c in coordinators for g in c.consumer_groups.values()):
            members.add_metric([consumer_group.group_id], len(consumer_group.members))
            generation.add_metric([consumer_group.group_id], consumer_group.group_epoch)
        yield members
        yield generation
        yield rebalances
        if not self.per_partition:
            return
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily("rivven_group_committed_offset", "Committed offset.", labels=labels)
        lag = GaugeMetricFamily("rivven_group_lag", "Log end offset minus the committed offset.", labels=labels)
        for record in (r for c in coordinators for r in c.offsets.records()):
            key = [record.group_id, record.topic, str(record.partition)]
            committed.add_metric(key, record.offset)
            topic = broker.topics.get(record.topic)
            if topic is not None and record.partition < len(topic.partitions):
                log = topic.partitions[record.partition]
                if log is not None and not log.closed:
                    lag.add_metric(key, max(0, log.log_end_offset - record.offset))
        yield committed
        yield lag
