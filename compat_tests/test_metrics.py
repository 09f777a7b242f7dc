"""Issue #20 (part): the metrics endpoint scraped while real clients run, exact values checked.

One broker with ``--metrics``: confluent-kafka commits and aborts transactions, one transaction is
left to the coordinator's timeout, kafka-python writes idempotently, a raw client sends the same
idempotent batch twice (one duplicate), and a group commits an offset. The design's seven metrics
must equal what was done; partition and group series must agree with the log; after a restart the
counters start again from zero while the gauges are rebuilt from the recovered state. Then
kafka-python's transactions (commits, an abort, a coordinator timeout) change the seven by exactly
what they did, and, on a broker of its own behind the fault proxy, answers the proxy dropped make
an idempotent producer resend batches the broker counts as duplicates, one per drop.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from rivven_kproto.codec.errors import Errors

from .broker_process import BrokerProcess
from .fault_proxy import DROP_RESPONSE, FaultProxy, FaultSchedule
from .test_idempotence import Raw
from .txn_helpers import create_topics

METRICS = re.compile(r"metrics on (http://[\d.]+:\d+)/metrics")
SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$")
TIMEOUT_S = 60


class Scraper:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    @property
    def base(self) -> str:
        return METRICS.findall(self.broker.log_text())[-1]

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=TIMEOUT_S) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def samples(self) -> dict[str, float]:
        """``name{labels}`` -> value, from one scrape."""
        status, text = self.get("/metrics")
        assert status == 200
        out: dict[str, float] = {}
        for line in text.splitlines():
            match = SAMPLE.match(line)
            if match and not line.startswith("#"):
                out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
        return out

    def wait_for(self, name: str, value: float) -> dict[str, float]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            samples = self.samples()
            if samples.get(name) == value or time.monotonic() > deadline:
                return samples
            time.sleep(0.2)


def versions_of(samples: dict[str, float], name: str, api: str) -> dict[str, float]:
    """version -> value of ``name{api=api,version=...}``."""
    prefix = f'{name}{{api="{api}",version="'
    return {key[len(prefix):].split('"')[0]: value for key, value in samples.items() if key.startswith(prefix)}


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Scraper]]:
    base: Path = tmp_path_factory.mktemp("metrics")
    config = base / "server.properties"
    # The coordinator looks for timed-out transactions every 200 ms (Kafka's key); every scrape is
    # rendered afresh (by default a rendering is reused briefly), so values are exact at once.
    config.write_text("transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n"
                      "kproto.metrics.max.age.ms=0\n")
    broker = BrokerProcess(base / "data", base / "broker.log",
                           ["--metrics", "127.0.0.1:0", "--config", str(config)]).start()
    try:
        yield broker, Scraper(broker)
    finally:
        if broker.alive():
            broker.stop()


def test_health_and_readiness(metered: tuple[BrokerProcess, Scraper]) -> None:
    _, scraper = metered
    assert scraper.get("/healthz") == (200, "ok\n")
    assert scraper.get("/readyz") == (200, "ready\n")
    assert scraper.get("/nope")[0] == 404


def test_design_metrics_are_exact_and_the_rest_consistent(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    create_topics(broker.bootstrap, {"metered-txn": 1, "metered-idem": 2, "metered-raw": 1})
    before = scraper.samples()
    assert before["rivven_transactions_started_total"] == 0 and before["rivven_idempotent_producers_active"] == 0

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-1", "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    for index in range(5):  # 3 commits, 2 client aborts
        producer.begin_transaction()
        producer.produce("metered-txn", f"t{index}".encode(), partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        if index < 3:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
    # One left open: the coordinator aborts it after its 1 s timeout.
    forgotten = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-2",
                          "transaction.timeout.ms": 1000, "linger.ms": 5})
    forgotten.init_transactions(TIMEOUT_S)
    forgotten.begin_transaction()
    forgotten.produce("metered-txn", b"forgotten", partition=0)
    assert forgotten.flush(TIMEOUT_S) == 0

    idempotent = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    for index in range(10):
        idempotent.send("metered-idem", f"i{index}".encode(), partition=index % 2)
    idempotent.flush(TIMEOUT_S)
    idempotent.close()

    raw = Raw(broker.bootstrap, "metered-raw")
    try:
        pid, epoch = raw.init_producer_id()
        first = raw.produce(pid, epoch, 0, count=3)
        assert first[0] == Errors.NONE
        assert raw.produce(pid, epoch, 0, count=3) == first  # the same batch again: a duplicate
    finally:
        raw.sock.close()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-group", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("metered-idem", 0, 2)], asynchronous=False)
    consumer.close()

    samples = scraper.wait_for("rivven_transactions_timed_out_total", 1)
    assert samples["rivven_transactions_started_total"] == 6
    assert samples["rivven_transactions_committed_total"] == 3
    assert samples["rivven_transactions_aborted_total"] == 3  # two by the client, one by the timeout
    assert samples["rivven_transactions_timed_out_total"] == 1
    assert samples["rivven_transactions_active"] == 0
    assert samples["rivven_idempotent_duplicates_total"] == 1
    assert samples["rivven_idempotent_producers_active"] == 4  # two transactional, kafka-python, raw

    # The log's own figures: 5 records + 5 markers + the forgotten record and its marker.
    hw = 'rivven_partition_high_watermark{partition="0",topic="metered-txn"}'
    assert samples[hw] == 12
    assert samples['rivven_partition_last_stable_offset{partition="0",topic="metered-txn"}'] == 12
    assert samples['rivven_partition_high_watermark{partition="0",topic="metered-idem"}'] == 5
    assert samples['rivven_partition_high_watermark{partition="0",topic="metered-raw"}'] == 3
    key = '{group="metered-group",partition="0",topic="metered-idem"}'
    assert samples["rivven_group_committed_offset" + key] == 2
    assert samples["rivven_group_lag" + key] == 5 - 2
    assert samples['rivven_groups{state="Empty"}'] >= 1
    assert samples['rivven_requests_total{api="Produce"}'] >= 3
    assert samples['rivven_requests_total{api="EndTxn"}'] == 5
    assert samples['rivven_connections_opened_total{listener="PLAINTEXT"}'] >= 4
    assert samples["rivven_bytes_received_total"] > 0 and samples["rivven_bytes_sent_total"] > 0
    # Latency by API and version: one series per version used, counting what requests_by_version counts.
    for api in ("Produce", "EndTxn", "Metadata"):
        durations = versions_of(samples, "rivven_request_duration_seconds_count", api)
        assert durations and durations == versions_of(samples, "rivven_requests_by_version_total", api), api
        assert sum(durations.values()) == samples[f'rivven_requests_total{{api="{api}"}}'], api
    # Appended per topic equals what was produced (the duplicate not counted); one marker per
    # ended transaction; the group's one generation-less commit; fsyncs under the interval policy.
    assert samples['rivven_topic_messages_appended_total{topic="metered-txn"}'] == 6
    assert samples['rivven_topic_messages_appended_total{topic="metered-idem"}'] == 10
    assert samples['rivven_topic_messages_appended_total{topic="metered-raw"}'] == 3
    assert samples['rivven_topic_bytes_appended_total{topic="metered-raw"}'] > 0
    assert samples["rivven_transaction_markers_written_total"] == 6
    assert not [name for name in samples if name.startswith("rivven_transaction_oldest_open_age_seconds")]
    assert samples['rivven_group_generation{group="metered-group"}'] == 0
    assert samples['rivven_group_rebalances_total{group="metered-group"}'] == 0  # commits only, no members
    assert samples["rivven_recovery_seconds"] > 0
    fsyncs = scraper.wait_for("rivven_fsync_partitions_total", samples["rivven_fsync_partitions_total"] or -1)
    assert fsyncs["rivven_fsync_duration_seconds_count"] >= 1 and fsyncs["rivven_fsync_partitions_total"] >= 1
    # Each transaction's Prepare -> Complete, by result; each request's queue and send phases.
    assert samples['rivven_transaction_completion_seconds_count{result="commit"}'] == 3
    assert samples['rivven_transaction_completion_seconds_count{result="abort"}'] == 3
    assert samples['rivven_request_queue_seconds_count{api="EndTxn"}'] == 5
    assert samples['rivven_response_send_seconds_count{api="EndTxn"}'] == 5
    # Both coordinators' logs are fsynced by the flusher's rounds (every second under interval).
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        synced = scraper.samples()
        txn, groups = (synced.get(f'rivven_fsync_coordinator_logs_total{{coordinator="{name}"}}', 0)
                       for name in ("txn", "groups"))
        if (txn >= 1 and groups >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert txn >= 1 and groups >= 1
    for log in ("segment", "txn", "groups"):  # each log kind's own fsync latency
        assert synced[f'rivven_log_fsync_duration_seconds_count{{log="{log}"}}'] >= 1
    assert list(versions_of(samples, "rivven_request_duration_seconds_count", "EndTxn").values()) == [5]  # one version


def test_a_subscribing_consumer_counts_rebalances(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-sub",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["metered-idem"])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.2)
        samples = scraper.samples()
        assert samples['rivven_group_rebalances_total{group="metered-sub"}'] >= 1
        assert samples['rivven_group_generation{group="metered-sub"}'] >= 1
        assert samples['rivven_group_members{group="metered-sub"}'] == 1
        assert samples['rivven_groups{state="Stable"}'] >= 1
    finally:
        consumer.close()


def test_an_open_transaction_shows_its_age(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-open", "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("metered-txn", b"open", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    name = 'rivven_transaction_oldest_open_age_seconds{partition="0",topic="metered-txn"}'
    first = scraper.samples()
    assert first["rivven_transactions_active"] == 1 and first[name] >= 0
    time.sleep(0.5)
    assert scraper.samples()[name] > first[name]  # it ages while open
    producer.commit_transaction(TIMEOUT_S)
    assert name not in scraper.samples()


def test_kproto_txns_stats_reads_the_same_counters(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    base = [sys.executable, "-m", "rivven_kproto", "--bootstrap", broker.bootstrap, "--format", "json", "txns", "stats"]
    through_metrics = subprocess.run([*base, "--metrics-url", scraper.base], text=True, capture_output=True, timeout=60)
    assert through_metrics.returncode == 0, through_metrics.stderr
    samples = scraper.samples()
    assert json.loads(through_metrics.stdout) == {
        "source": "metrics",
        **{key: int(samples[f"rivven_transactions_{key}{'_total' if key != 'active' else ''}"])
           for key in ("started", "committed", "aborted", "timed_out", "active")},
    }
    through_protocol = subprocess.run(base, text=True, capture_output=True, timeout=60)
    assert through_protocol.returncode == 0, through_protocol.stderr
    listed = json.loads(through_protocol.stdout)
    assert listed["source"] == "ListTransactions" and listed["committed"] is None
    assert listed["active"] == samples["rivven_transactions_active"]
    assert sum(listed["by_state"].values()) >= 2 and listed["by_state"].get("CompleteAbort", 0) >= 1  # metered-2 timed out


DESIGN = ("rivven_transactions_started_total", "rivven_transactions_committed_total", "rivven_transactions_aborted_total",
          "rivven_transactions_timed_out_total", "rivven_transactions_active", "rivven_idempotent_producers_active",
          "rivven_idempotent_duplicates_total")


def changes(before: dict[str, float], after: dict[str, float], names: Iterable[str]) -> dict[str, float]:
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


def test_kafka_python_transactions_change_the_design_metrics_exactly(metered: tuple[BrokerProcess, Scraper]) -> None:
    """kafka-python's transactional producer: two commits and an abort, then a second producer's
    transaction left to the coordinator's timeout; each of the seven changes by exactly that."""
    broker, scraper = metered
    create_topics(broker.bootstrap, {"metered-kp": 1})
    appended = 'rivven_topic_messages_appended_total{topic="metered-kp"}'
    before = scraper.samples()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="metered-kp-1")
    try:
        producer.init_transactions()
        for index, commit in enumerate((True, True, False)):
            producer.begin_transaction()
            for record in range(2 if commit else 1):
                producer.send("metered-kp", f"kp{index}.{record}".encode(), partition=0).get(TIMEOUT_S)
            open_now = changes(before, scraper.samples(), DESIGN)
            assert open_now["rivven_transactions_active"] == 1 and open_now["rivven_transactions_started_total"] == index + 1
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(TIMEOUT_S)
    middle = scraper.samples()
    assert changes(before, middle, (*DESIGN, appended)) == {
        "rivven_transactions_started_total": 3, "rivven_transactions_committed_total": 2,
        "rivven_transactions_aborted_total": 1, "rivven_transactions_timed_out_total": 0,
        "rivven_transactions_active": 0, "rivven_idempotent_producers_active": 1,
        "rivven_idempotent_duplicates_total": 0, appended: 5,
    }
    end_txn = [sum(versions_of(scrape, "rivven_request_duration_seconds_count", "EndTxn").values())
               for scrape in (before, middle)]
    assert end_txn[1] - end_txn[0] == 3  # two commits and an abort, in the version kafka-python chose

    forgotten = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="metered-kp-2",
                              transaction_timeout_ms=1000)
    try:
        forgotten.init_transactions()
        forgotten.begin_transaction()
        forgotten.send("metered-kp", b"forgotten", partition=0).get(TIMEOUT_S)
        after = scraper.wait_for("rivven_transactions_timed_out_total", middle["rivven_transactions_timed_out_total"] + 1)
    finally:
        forgotten.close(0)  # its transaction is the coordinator's now
    markers = "rivven_transaction_markers_written_total"
    assert changes(before, after, (*DESIGN, appended, markers)) == {
        "rivven_transactions_started_total": 4, "rivven_transactions_committed_total": 2,
        "rivven_transactions_aborted_total": 2, "rivven_transactions_timed_out_total": 1,
        "rivven_transactions_active": 0, "rivven_idempotent_producers_active": 2,
        "rivven_idempotent_duplicates_total": 0, appended: 6, markers: 4,
    }
    assert after['rivven_partition_high_watermark{partition="0",topic="metered-kp"}'] == 6 + 4


def test_duplicates_injected_by_the_fault_proxy_are_counted(tmp_path: Path) -> None:
    """An idempotent producer behind the fault proxy: the proxy drops the broker's answers to
    written batches, the producer sends each again, and the broker answers those as duplicates.
    ``rivven_idempotent_duplicates_total`` rises by exactly the drops; the log holds each record once."""
    config = tmp_path / "server.properties"
    config.write_text("kproto.metrics.max.age.ms=0\n")
    with FaultProxy() as proxy:
        broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", [
            "--advertised-listener", f"127.0.0.1:{proxy.port}", "--metrics", "127.0.0.1:0", "--config", str(config)])
        broker.start()
        proxy.upstream_port = broker.port
        try:
            scraper = Scraper(broker)
            create_topics(proxy.bootstrap, {"metered-dup": 1})
            before = scraper.samples()
            proxy.reset(FaultSchedule(seed=20, probability=0.5, budget={DROP_RESPONSE: 3}, skip_first=1))
            producer = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True, "acks": "all",
                                 "max.in.flight.requests.per.connection": 1, "linger.ms": 0})
            records = 12
            for index in range(records):  # one batch, one Produce request at a time
                producer.produce("metered-dup", f"d{index}".encode(), partition=0)
                assert producer.flush(TIMEOUT_S) == 0
            drops = proxy.injected[DROP_RESPONSE]
            assert drops == 3, proxy.injected  # the whole budget was spent, each on a written batch
            after = scraper.samples()
            assert changes(before, after, DESIGN) == {
                "rivven_transactions_started_total": 0, "rivven_transactions_committed_total": 0,
                "rivven_transactions_aborted_total": 0, "rivven_transactions_timed_out_total": 0,
                "rivven_transactions_active": 0, "rivven_idempotent_producers_active": 1,
                "rivven_idempotent_duplicates_total": drops,
            }
            assert after['rivven_topic_messages_appended_total{topic="metered-dup"}'] == records
            assert after['rivven_partition_high_watermark{partition="0",topic="metered-dup"}'] == records
        finally:
            assert broker.stop() == 0, broker.log_text()[-4000:]


def test_counters_restart_and_gauges_are_rebuilt(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    before = scraper.samples()
    broker.restart()
    after = scraper.wait_for("rivven_idempotent_producers_active", before["rivven_idempotent_producers_active"])
    assert after["rivven_transactions_started_total"] == 0 and after["rivven_idempotent_duplicates_total"] == 0
    for name in ("rivven_idempotent_producers_active", "rivven_topics",
                 'rivven_partition_high_watermark{partition="0",topic="metered-txn"}',
                 'rivven_group_committed_offset{group="metered-group",partition="0",topic="metered-idem"}'):
        assert after[name] == before[name], name


DASHBOARD = Path(__file__).resolve().parents[1] / "tools" / "grafana" / "rivven_kproto.json"
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def test_the_grafana_dashboard_uses_only_exported_metrics(metered: tuple[BrokerProcess, Scraper]) -> None:
    _, scraper = metered
    _, text = scraper.get("/metrics")
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    exported = families | {family + suffix for family in families for suffix in SUFFIXES}
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(expressions) >= 12
    named = {name for expr in expressions for name in re.findall(r"\brivven_[a-z_]+", expr)}
    assert named and not (named - exported), sorted(named - exported)
    # The design's seven are all on the dashboard.
    for name in ("rivven_transactions_started_total", "rivven_transactions_committed_total", "rivven_transactions_aborted_total",
                 "rivven_transactions_timed_out_total", "rivven_transactions_active",
                 "rivven_idempotent_producers_active", "rivven_idempotent_duplicates_total"):
        assert name in named, name


BLOCKED_FSYNC_SERVE = """
import os, sys, time
release = sys.argv.pop(1)
real_fsync = os.fsync
def held_fsync(fd):
    while not os.path.exists(release):  # the test releases the disk once it has seen /readyz say 503
        time.sleep(0.01)
    return real_fsync(fd)
os.fsync = held_fsync
from rivven_kproto.cli.main import main
sys.exit(main())
"""


def test_readyz_is_503_until_recovery_is_done(tmp_path: Path) -> None:
    """Opening the data directory (here: its first fsync) is held until the test has seen the
    endpoint answer /healthz 200 and /readyz 503; then the broker becomes ready."""
    release = tmp_path / "release"
    log_path = tmp_path / "broker.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-c", BLOCKED_FSYNC_SERVE, str(release), "serve", "--data-dir", str(tmp_path / "data"),
             "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (found := METRICS.findall(log_path.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        base = found[0]

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(base + path, timeout=TIMEOUT_S) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()

        assert get("/healthz") == (200, "ok\n")
        assert get("/readyz")[0] == 503
        assert "listening on" not in log_path.read_text()
        release.touch()
        while get("/readyz")[0] != 200:
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        assert "listening on" in log_path.read_text()
    finally:
        process.terminate()
        process.wait(TIMEOUT_S)


def test_the_dashboard_renders_from_a_real_run(tmp_path: Path) -> None:
    """tools/grafana/render.py: a broker, a mixed workload, scrapes, every panel drawn to a PNG."""
    out = tmp_path / "dashboard.png"
    result = subprocess.run([sys.executable, "-m", "tools.grafana.render", "--seconds", "8", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "client error" not in result.stderr, result.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
