"""One consumer-group member in its own process, driven over stdin/stdout, for test_groups.py.

    python group_member.py <client> <bootstrap> <topic> <group> <name>

``client`` is confluent-kafka, kafka-python or aiokafka. The member subscribes to ``topic`` in
``group`` (session.timeout.ms 6000, heartbeat 1000 ms, max.poll.interval 300 s, no auto-commit,
earliest reset) and polls until told otherwise. Commands on stdin, one per line: ``commit``
(commit the consumed positions synchronously), ``close`` (leave the group and exit). Events on
stdout, one JSON object per line: ``{"event": "assignment", "partitions": [...]}`` whenever the
assignment changes, ``{"event": "records", "records": [[partition, offset, value], ...]}``,
``{"event": "committed"}``, ``{"event": "closed"}``, ``{"event": "error", "message": ...}``.
Being a process of its own, a member can be SIGKILLed: it then stops heartbeating without
leaving, which is how the tests make the coordinator expire a session.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
import time
from typing import Any

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
MAX_POLL_INTERVAL_MS = 300_000
RUN_LIMIT_S = 120  # a watchdog: an orphaned member never outlives the test by much


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def stdin_commands() -> queue.Queue[str]:
    commands: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")  # the parent went away

    threading.Thread(target=read, daemon=True).start()
    return commands


class Tracker:
    def __init__(self) -> None:
        self.assignment: list[int] | None = None
        self.deadline = time.monotonic() + RUN_LIMIT_S

    def assigned(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.assignment:
            self.assignment = partitions
            emit("assignment", partitions=partitions)

    def expired(self) -> bool:
        return time.monotonic() > self.deadline


def run_confluent(bootstrap: str, topic: str, group: str, name: str) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS, "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic])
    commands, tracker = stdin_commands(), Tracker()
    while not tracker.expired():
        msg = consumer.poll(0.1)
        if msg is not None:
            if msg.error() is not None:
                emit("error", message=str(msg.error()))
            else:
                emit("records", records=[[msg.partition(), msg.offset(), msg.value().decode()]])
        tracker.assigned([tp.partition for tp in consumer.assignment()])
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise
            emit("committed")
        elif command == "close":
            break
    consumer.close()
    emit("closed")


def run_kafka_python(bootstrap: str, topic: str, group: str, name: str) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS, enable_auto_commit=False, auto_offset_reset="earliest",
    )
    commands, tracker = stdin_commands(), Tracker()
    while not tracker.expired():
        batch = consumer.poll(timeout_ms=100)
        records = [[r.partition, r.offset, r.value.decode()] for rs in batch.values() for r in rs]
        if records:
            emit("records", records=records)
        tracker.assigned([tp.partition for tp in consumer.assignment()])
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            consumer.commit()
            emit("committed")
        elif command == "close":
            break
    consumer.close()
    emit("closed")


async def run_aiokafka(bootstrap: str, topic: str, group: str, name: str) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS, enable_auto_commit=False, auto_offset_reset="earliest",
    )
    await consumer.start()
    commands, tracker = stdin_commands(), Tracker()
    while not tracker.expired():
        batch = await consumer.getmany(timeout_ms=100)
        records = [[r.partition, r.offset, r.value.decode()] for rs in batch.values() for r in rs]
        if records:
            emit("records", records=records)
        tracker.assigned([tp.partition for tp in consumer.assignment()])
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            await consumer.commit()
            emit("committed")
        elif command == "close":
            break
    await consumer.stop()
    emit("closed")


def main() -> None:
    client, bootstrap, topic, group, name = sys.argv[1:6]
    try:
        if client == "confluent-kafka":
            run_confluent(bootstrap, topic, group, name)
        elif client == "kafka-python":
            run_kafka_python(bootstrap, topic, group, name)
        elif client == "aiokafka":
            asyncio.run(run_aiokafka(bootstrap, topic, group, name))
        else:
            raise SystemExit(f"unknown client {client}")
    except Exception as exc:  # reported to the test, which fails with it
        emit("error", message=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
