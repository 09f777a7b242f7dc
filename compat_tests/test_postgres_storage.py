"""The PostgreSQL storage engine (#19) with a real PostgreSQL server and real clients.

A throwaway server (initdb + pg_ctl from Debian's ``postgresql`` package, the plugin's
``postgres_server`` fixture) for the session; each test uses its own database, so brokers of different tests never meet. The broker keeps nothing that is
not in the database: a broker killed with SIGKILL and a *new* broker process with an empty data
directory serve exactly what was acknowledged.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rivven_kproto.testing.postgres import PostgresServer

from .broker_process import BrokerProcess
from .txn_helpers import TIMEOUT_S, consume, create_topics, txn_producer, values


@pytest.fixture
def database(postgres_url: str) -> str:
    """A fresh database on the session's throwaway server (the plugin's ``postgres_url``)."""
    return postgres_url


_STARTED: list[BrokerProcess] = []


@pytest.fixture(autouse=True)
def kill_brokers_left_running() -> Iterator[None]:
    """A failing test must not leave its brokers (and their database connections) behind."""
    yield
    while _STARTED:
        _STARTED.pop().kill()


def registered(url: str) -> list[dict]:
    """``kproto cluster members`` as an operator runs it: the brokers registered in the database."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "rivven_kproto", "--format", "json", "cluster", "members",
                           "--storage", url], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def members_when(url: str, condition: Callable[[list[dict]], bool]) -> list[dict]:
    """The registry once ``condition`` holds (heartbeats are once a second), else as it last was."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition(found := registered(url)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def pg_broker(tmp_path: Path, url: str, name: str = "b", *args: str) -> BrokerProcess:
    broker = BrokerProcess(tmp_path / f"{name}-data", tmp_path / f"{name}.log", ["--storage", url, *args])
    _STARTED.append(broker)
    return broker.start()


def produce_acknowledged(
    bootstrap: str, topic: str, partitions: int, count: int, prefix: str = "", **config: object
) -> set[bytes]:
    """Idempotent acks=all produce; the values the broker acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **config})
    acknowledged: set[bytes] = set()
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback
        if err is None:
            acknowledged.add(msg.value())
        else:
            errors.append(str(err))

    for i in range(count):
        producer.produce(topic, f"{prefix}{topic}-{i}".encode(), partition=i % partitions, on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(TIMEOUT_S * 4) == 0
    assert errors == []
    return acknowledged


def test_a_new_broker_on_the_same_database_serves_everything_acknowledged(tmp_path: Path, database: str) -> None:
    """kill -9 of the broker, then a fresh process with an empty data directory: nothing
    acknowledged is lost, nothing is duplicated, offsets are dense; the topic and its config too."""
    broker = pg_broker(tmp_path, database, "first")
    topic = "pg-ack"
    create_topics(broker.bootstrap, {topic: 3}, {"cleanup.policy": "delete", "max.message.bytes": "200000"})
    acknowledged = produce_acknowledged(broker.bootstrap, topic, 3, 3000)
    assert len(acknowledged) == 3000
    broker.kill()

    fresh = pg_broker(tmp_path, database, "second")  # a new data directory: the state is all in PostgreSQL
    try:
        seen = values(consume("confluent-kafka", fresh.bootstrap, [(topic, p) for p in range(3)],
                              committed=False, expected=3000))
        got = [v for vs in seen.values() for v in vs]
        assert sorted(got) == sorted(acknowledged)  # exactly once each
        for partition, vs in seen.items():
            assert vs == [f"{topic}-{i}".encode() for i in range(partition[1], 3000, 3)]  # in order
        more = produce_acknowledged(fresh.bootstrap, topic, 3, 30, prefix="more-")  # appends continue at the end
        assert len(more) == 30
        consumer = Consumer({"bootstrap.servers": fresh.bootstrap, "group.id": "pg-watermarks"})
        try:
            for p in range(3):
                assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S) == (0, 1010)
            # ListOffsets by timestamp: looked up in the database on a worker thread, record-exact.
            with psycopg.connect(database) as conn:
                rows = conn.execute(
                    "SELECT base_offset, last_offset, max_timestamp FROM kproto_batches WHERE partition = 1"
                    " ORDER BY base_offset").fetchall()
            base, last, stamp = rows[len(rows) // 2]
            wanted = [TopicPartition(topic, 1, stamp), TopicPartition(topic, 0, 0),
                      TopicPartition(topic, 2, int(time.time() * 1000) + 3_600_000)]
            found = consumer.offsets_for_times(wanted, timeout=TIMEOUT_S)
            assert all(tp.error is None for tp in found)
            assert found[0].offset <= last and found[1].offset == 0 and found[2].offset == -1
            earlier = [r for r in rows if r[1] < found[0].offset]  # batches wholly before the answer
            assert all(r[2] < stamp for r in earlier)  # none of them reaches the timestamp
        finally:
            consumer.close()
        from confluent_kafka.admin import AdminClient, ConfigResource

        admin = AdminClient({"bootstrap.servers": fresh.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
        assert configs["max.message.bytes"].value == "200000"
    finally:
        fresh.stop()


def test_transactions_and_group_offsets_survive_kill(tmp_path: Path, database: str) -> None:
    """Committed transactions visible to read_committed, aborted ones never; the group's committed
    offsets and the producer's fencing state come back after kill -9 (all from the database)."""
    broker = pg_broker(tmp_path, database)
    topic = "pg-txn"
    create_topics(broker.bootstrap, {topic: 2})
    producer = txn_producer("confluent-kafka", broker.bootstrap, "pg-txn-id")
    producer.init()
    producer.begin()
    for i in range(20):
        producer.send(topic, i % 2, f"committed-{i}".encode())
    producer.commit()
    producer.begin()
    for i in range(6):
        producer.send(topic, i % 2, f"aborted-{i}".encode())
    producer.flush()
    producer.abort()
    producer.close()

    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pg-group", "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)], asynchronous=False)
    group.close()
    broker.kill()
    broker.start()
    try:
        seen = values(consume("confluent-kafka", broker.bootstrap, [(topic, 0), (topic, 1)], committed=True,
                              expected=20))
        got = sorted(v for vs in seen.values() for v in vs if v is not None)
        assert got == sorted(f"committed-{i}".encode() for i in range(20))
        group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pg-group"})
        try:
            committed = group.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT_S)
            assert [(tp.partition, tp.offset) for tp in committed] == [(0, 7), (1, 3)]
        finally:
            group.close()
        again = txn_producer("confluent-kafka", broker.bootstrap, "pg-txn-id")  # the id is known: epoch bumped
        again.init()
        again.begin()
        again.send(topic, 0, b"after-restart")
        again.commit()
        again.close()
        seen = values(consume("confluent-kafka", broker.bootstrap, [(topic, 0)], committed=True, expected=11))
        assert seen[(topic, 0)][-1] == b"after-restart"
    finally:
        broker.stop()


def test_a_database_restart_loses_and_duplicates_nothing(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str
) -> None:
    """PostgreSQL stops while a producer sends, then starts again: the broker keeps what it could
    not commit, acknowledges it once committed, and needs no restart."""
    url, postgres = postgres_url, postgres_server
    broker = pg_broker(tmp_path, url)
    topic = "pg-outage"
    create_topics(broker.bootstrap, {topic: 2})
    produce_acknowledged(broker.bootstrap, topic, 2, 100)
    postgres.stop("immediate")  # as a crash: the server replays its WAL at the next start
    restarted = threading.Event()

    def start_later() -> None:
        time.sleep(3)
        postgres.restart()
        restarted.set()

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        acknowledged = produce_acknowledged(
            broker.bootstrap, topic, 2, 400, "during-", **{"message.timeout.ms": 120_000, "request.timeout.ms": 30_000})
    finally:
        starter.join()
    assert restarted.is_set() and len(acknowledged) == 400
    assert broker.alive()
    seen = values(consume("confluent-kafka", broker.bootstrap, [(topic, 0), (topic, 1)], committed=False,
                          expected=500))
    got = [v for vs in seen.values() for v in vs]
    assert len(got) == len(set(got)) == 500
    assert "storage unavailable" in broker.log_text()
    assert "ownership of the database taken again" in broker.log_text()
    with pytest.raises(RuntimeError, match="another broker is serving this database"):
        # The node lock was lost with the server and taken again (the broker, started without
        # --node-id, was given node 0).
        pg_broker(tmp_path, url, "intruder", "--node-id", "0")
    broker.stop()


def test_a_second_broker_with_the_same_node_id_is_refused(tmp_path: Path, database: str) -> None:
    first = pg_broker(tmp_path, database, "first", "--node-id", "3")
    try:
        with pytest.raises(RuntimeError, match="another broker is serving this database as node 3"):
            pg_broker(tmp_path, database, "second", "--node-id", "3")
        assert first.alive()
    finally:
        first.stop()


def test_retention_deletes_old_batches_from_the_database(tmp_path: Path, database: str) -> None:
    """Records stamped a day ago on a topic that keeps an hour: the broker's retention check
    (every 200 ms here) moves the log start past them and deletes their rows; new ones stay."""
    broker = BrokerProcess(tmp_path / "r-data", tmp_path / "r.log",
                           ["--storage", database], env={"KPROTO_LOG_RETENTION_CHECK_INTERVAL_MS": "200"})
    _STARTED.append(broker)
    broker.start()
    topic = "pg-retention"
    create_topics(broker.bootstrap, {topic: 1}, {"retention.ms": "3600000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    day_ago = int(time.time() * 1000) - 86_400_000
    for i in range(10):
        producer.produce(topic, f"old-{i}".encode(), partition=0, timestamp=day_ago + i)
    assert producer.flush(TIMEOUT_S) == 0
    for i in range(5):
        producer.produce(topic, f"new-{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pg-retention"})
    try:
        deadline = time.monotonic() + TIMEOUT_S
        low = 0
        while low == 0 and time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
            time.sleep(0.2)
        assert low > 0 and high == 15
    finally:
        consumer.close()
    seen = values(consume("confluent-kafka", broker.bootstrap, [(topic, 0)], committed=False, expected=15 - low))
    assert seen[(topic, 0)][-5:] == [f"new-{i}".encode() for i in range(5)]
    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT min(base_offset) FROM kproto_batches").fetchone()
    assert row is not None and row[0] >= low
    broker.stop()


def test_scram_credentials_and_topics_live_in_the_database(tmp_path: Path, database: str) -> None:
    """The catalog documents (topics, SCRAM credentials) are rows: a broker with a new data
    directory on the same database knows them; deleting a topic removes its batch rows."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = pg_broker(tmp_path, database, "first")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion("pg-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    create_topics(broker.bootstrap, {"pg-kept": 1, "pg-dropped": 2})
    produce_acknowledged(broker.bootstrap, "pg-dropped", 2, 50)
    admin.delete_topics(["pg-dropped"])["pg-dropped"].result(TIMEOUT_S)
    broker.kill()

    fresh = pg_broker(tmp_path, database, "second")
    try:
        admin = AdminClient({"bootstrap.servers": fresh.bootstrap})
        described = admin.describe_user_scram_credentials(["pg-user"])["pg-user"].result(TIMEOUT_S)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 4096)]
        topics = admin.list_topics(timeout=TIMEOUT_S).topics
        assert "pg-kept" in topics and "pg-dropped" not in topics
        with psycopg.connect(database) as conn:
            row = conn.execute("SELECT count(*) FROM kproto_batches").fetchone()
        assert row == (0,)  # the deleted topic's rows are gone (its deletion job ran before the answer's round ended)
    finally:
        fresh.stop()


def test_an_unreachable_database_stops_start_up_with_one_line(tmp_path: Path) -> None:
    """No server on the port: exit 1 and one error line, the password not shown."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    props = tmp_path / "server.properties"
    props.write_text("kproto.storage.start.wait.ms=2000\n")  # the retry is tested; 60 s of it is not needed
    done = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
         "--storage", f"postgresql://kproto:hunter2@127.0.0.1:{port}/kproto",
         "--config", str(props)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert "error: storage postgresql://kproto:***@127.0.0.1" in done.stderr and "unavailable" in done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_a_standby_broker_takes_over_when_the_serving_one_dies(tmp_path: Path, database: str) -> None:
    """``--standby`` waits while another broker serves the database; after kill -9 of that one it
    takes over (loading everything from the database) and the same clients, bootstrapped with both
    addresses, carry on: nothing acknowledged lost or duplicated, transactions resume."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        standby_port = probe.getsockname()[1]
    active = BrokerProcess(tmp_path / "a-data", tmp_path / "a.log", ["--storage", database],
                           env={"KPROTO_NODE_ID": "1"})
    standby = BrokerProcess(tmp_path / "s-data", tmp_path / "s.log", ["--storage", database, "--standby"],
                            env={"KPROTO_NODE_ID": "2"})
    _STARTED.extend([active, standby])
    active.start()
    bootstrap = f"{active.bootstrap},127.0.0.1:{standby_port}"
    topic = "pg-failover"
    create_topics(active.bootstrap, {topic: 2})
    taking_over = threading.Thread(target=standby.start, args=(standby_port,), daemon=True)
    taking_over.start()
    deadline = time.monotonic() + TIMEOUT_S
    while "standby:" not in standby.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "standby:" in standby.log_text()
    # Both are registered with their node ids and advertised addresses, each in its role.
    members = members_when(database, lambda m: len(m) == 2)
    assert [(m["node_id"], m["port"], m["role"], m["live"]) for m in members] == [
        (1, active.port, "coordinator", True), (2, standby_port, "standby", True)]

    before = produce_acknowledged(bootstrap, topic, 2, 300, "before-")
    txn = txn_producer("confluent-kafka", bootstrap, "pg-failover-txn")
    txn.init()
    txn.begin()
    txn.send(topic, 0, b"committed-before")
    txn.commit()
    active.kill()
    taking_over.join(TIMEOUT_S * 2)
    assert standby.alive() and standby.port == standby_port
    # The standby now serves; the killed broker's row stays but its heartbeat stopped.
    members = members_when(database, lambda m: m[0]["node_id"] == 2 and m[1]["heartbeat_age_s"] > 2)
    assert (members[0]["node_id"], members[0]["role"], members[0]["live"]) == (2, "coordinator", True)
    assert members[1]["node_id"] == 1 and members[1]["heartbeat_age_s"] > members[0]["heartbeat_age_s"]

    after = produce_acknowledged(bootstrap, topic, 2, 300, "after-")
    again = txn_producer("confluent-kafka", bootstrap, "pg-failover-txn")  # fences the old epoch
    again.init()
    again.begin()
    again.send(topic, 1, b"committed-after")
    again.commit()
    again.close()
    seen = values(consume("confluent-kafka", standby.bootstrap, [(topic, 0), (topic, 1)], committed=True,
                          expected=602))
    got = [v for vs in seen.values() for v in vs if v is not None]
    assert sorted(got) == sorted([*before, *after, b"committed-before", b"committed-after"])
    standby.stop()


@pytest.mark.parametrize("fsync", ["never", "always"])
def test_every_fsync_policy_acknowledges_only_committed_records(tmp_path: Path, database: str, fsync: str) -> None:
    """The fsync policy is the native log's business: on PostgreSQL a produce is answered after
    its commit whatever ``--fsync`` says."""
    broker = BrokerProcess(tmp_path / "f-data", tmp_path / "f.log", ["--storage", database, "--fsync", fsync])
    _STARTED.append(broker)
    broker.start()
    create_topics(broker.bootstrap, {"pg-policy": 1})
    acknowledged = produce_acknowledged(broker.bootstrap, "pg-policy", 1, 200)
    broker.kill()
    fresh = pg_broker(tmp_path, database, "fresh")
    seen = values(consume("confluent-kafka", fresh.bootstrap, [("pg-policy", 0)], committed=False, expected=200))
    assert sorted(seen[("pg-policy", 0)]) == sorted(acknowledged)
    fresh.stop()


def test_a_waiting_standby_stops_on_sigterm(tmp_path: Path, database: str) -> None:
    """Signals are heard from the start: a standby waiting for the database exits cleanly."""
    import signal
    import subprocess
    import sys

    active = pg_broker(tmp_path, database, "active")
    log_path = tmp_path / "standby.log"
    with log_path.open("wb") as log:
        standby = subprocess.Popen(
            [sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:0", "--data-dir",
             str(tmp_path / "standby-data"), "--storage", database, "--standby"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while "standby:" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "standby:" in log_path.read_text()
        assert len(members_when(database, lambda m: len(m) == 2)) == 2
        standby.send_signal(signal.SIGTERM)
        assert standby.wait(TIMEOUT_S) == 0
        assert active.alive()
        # A broker that stops cleanly leaves the registry.
        assert [(m["role"], m["port"]) for m in registered(database)] == [("coordinator", active.port)]
    finally:
        if standby.poll() is None:
            standby.kill()
        active.stop()


def test_an_idempotent_retry_is_answered_only_once_its_first_copy_is_committed(tmp_path: Path, database: str) -> None:
    """#36 B: the same idempotent batch sent again on a second connection while the first copy's
    database commit is held up (a test transaction locks the partition's row) must not be
    acknowledged before that commit: kill -9 then would lose an acknowledged record. Whatever the
    retry was answered, a fresh broker on the database serves every acknowledged record."""
    from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest

    from .txn_helpers import Raw, wait_for

    broker = pg_broker(tmp_path, database, "first")
    topic = "pg-dup-ack"
    create_topics(broker.bootstrap, {topic: 1})
    setup = Raw(broker.bootstrap)
    init = setup.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert init.error_code == 0
    answers: dict[str, tuple[int, int] | BaseException] = {}
    # The partition's row exists once a first batch is committed.
    assert setup.produce(topic, 0, [b"first"], pid=init.producer_id, epoch=init.producer_epoch, seq=0) == (0, 0)

    def send(name: str) -> None:
        raw = Raw(broker.bootstrap)
        try:
            answers[name] = raw.produce(topic, 0, [b"only-once"], pid=init.producer_id, epoch=init.producer_epoch, seq=1)
        except (OSError, EOFError, ConnectionError) as exc:
            answers[name] = exc

    with psycopg.connect(database) as holder, psycopg.connect(database, autocommit=True) as watcher:
        holder.execute("SELECT * FROM kproto_partitions FOR UPDATE")  # the broker's commit waits behind this

        def commit_waiting() -> bool:
            row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                 " AND query LIKE '%%kproto_partitions%%'").fetchone()
            return bool(row and row[0])

        first = threading.Thread(target=send, args=("first",), daemon=True)
        first.start()
        assert wait_for(commit_waiting, TIMEOUT_S), f"the first copy's commit never started: {answers}"
        retry = threading.Thread(target=send, args=("retry",), daemon=True)
        retry.start()
        retry.join(5.0)  # before the fix the retry was answered at once, while the commit waited
        answered_while_held = dict(answers)
        broker.kill()
        holder.rollback()
    first.join(TIMEOUT_S)
    retry.join(TIMEOUT_S)
    assert answered_while_held == {}, f"answered before the first copy was committed: {answered_while_held}"
    acknowledged = [name for name, answer in answers.items() if answer == (0, 1)]

    second = pg_broker(tmp_path, database, "second")
    check = Raw(second.bootstrap)
    assert check.end_offsets(topic, [0], committed=False) == {0: 2 if acknowledged else 1}, (
        f"acknowledged: {acknowledged}")


def test_the_broker_warns_at_start_when_acknowledgements_do_not_survive_a_failover(
        tmp_path: Path, database: str) -> None:
    """#36: no synchronous standby (the throwaway server has none) is a warning; so is
    synchronous_commit off (set for this database only), which a crash alone can lose writes to."""
    broker = pg_broker(tmp_path, database, "plain")
    assert "no synchronous standby" in broker.log_text()
    broker.kill()
    with psycopg.connect(database, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    assert "synchronous_commit is off" in pg_broker(tmp_path, database, "async").log_text()


def test_a_broker_started_before_its_database_waits_for_it(tmp_path: Path) -> None:
    """#36: a broker started while PostgreSQL is down (starting up, restarting, failing over) tries
    again until it is up, as a Kafka broker waits for its controllers, instead of exiting; a
    database that does not exist is refused at once (waiting would not help)."""
    import shutil
    import tempfile

    from rivven_kproto.testing.postgres import new_server

    base = Path(tempfile.mkdtemp(prefix="kproto-pg-wait-"))  # as root: outside pytest's 0700 directories
    server = new_server(base)
    try:
        server.start()  # creates the database
        server.stop()
        broker = BrokerProcess(tmp_path / "data", tmp_path / "b.log", ["--storage", server.url])
        _STARTED.append(broker)
        started: list[object] = []
        thread = threading.Thread(target=lambda: started.append(broker.start(timeout=4 * TIMEOUT_S)), daemon=True)
        thread.start()
        assert wait_for_text(tmp_path / "b.log", "trying again"), "the broker did not wait for its database"
        server.restart()
        thread.join(4 * TIMEOUT_S)
        assert started == [broker], "the broker never served once its database was up"
        create_topics(broker.bootstrap, {"waited": 1})
        assert len(produce_acknowledged(broker.bootstrap, "waited", 1, 10)) == 10

        missing = BrokerProcess(tmp_path / "m-data", tmp_path / "m.log",
                                ["--storage", server.url.rsplit("/", 1)[0] + "/no_such_database"])
        with pytest.raises(RuntimeError, match="broker exited"):
            missing.start(timeout=4 * TIMEOUT_S)
        assert "trying again" not in (tmp_path / "m.log").read_text()
    finally:
        with contextlib.suppress(Exception):
            server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)


def wait_for_text(path: Path, text: str) -> bool:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


def test_pooled_sessions_give_up_lock_waits_and_idle_transactions(postgres_url: str) -> None:
    """A commit waiting on a row lock (or a session left idle in a transaction) fails after a
    while and the round is retried, instead of holding every acknowledgement behind it (#36: a
    broker resumed after a long pause answered nothing for 48 s with no log line)."""
    from rivven_kproto.broker.storage.postgres.pool import PgPool

    pool = PgPool(postgres_url)
    pool.open()
    try:
        with pool.connection() as conn:
            assert conn.execute("SHOW lock_timeout").fetchone() == ("10s",)
            assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1min",)
    finally:
        pool.close()
