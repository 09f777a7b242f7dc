"""python -m tools.bench.pg_round_cpu: what one flusher round of the PostgreSQL engine costs in CPU,
on the broker's side (the thread that writes it) and on the server's, by the shape of the round.

    python -m tools.bench.pg_round_cpu                  # about 20 s
    python -m tools.bench.pg_round_cpu --rounds 100 --json pg-round-cpu.json

A throwaway server (``rivven_kproto.testing.postgres``) with the engine's schema; each shape is
written ``--rounds`` times through the engine's own round writer (``commit._write_round``: BEGIN
and the round's one statement in a pipeline, then COMMIT), after 20 rounds of warm-up (the
statement is prepared by then). Shapes: a transaction's rounds (one 1.1 KB batch; one
coordinator entry; both), and produce rounds of 8 partitions with 60 KB or 460 KB batches of
random bytes, and of 460 KB batches of uncompressed records (random 100-byte values with their
record framing), the data that made pglz expensive (schema migration 6). Per round: this
thread's CPU (``time.thread_time``: psycopg, libpq and their system calls), the server's CPU
(its processes' CPU time from ``/proc``) and the wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import psycopg

from rivven_kproto.broker.storage.postgres import schema
from rivven_kproto.broker.storage.postgres.commit import _write_round
from rivven_kproto.broker.storage.postgres.round_writes import RoundWrites
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.testing.postgres import temporary_postgres

from .__main__ import machine
from .procstats import tree_cpu_s
from .report import render_plain

WARM_UP = 20
Stage = Callable[[RoundWrites, Any], None]


class _Item:
    """What ``_write_round`` takes of a log's commit: its staging function, no statements of its own."""

    def __init__(self, stage: Stage) -> None:
        self.stage, self.write, self.fenced = stage, None, False


class _Partitions:
    """Partitions of one topic whose ends move by each staged batch, as a leader's would."""

    def __init__(self, count: int) -> None:
        self.topic, self.writer = uuid.uuid4(), uuid.uuid4()
        self.ends = [0] * count

    def stage(self, batch: Callable[[], bytes], records: int) -> list[Stage]:
        """One staging function per partition; the batches are made now (a pool of 4 per
        partition), so the rounds measured do not pay for making them."""
        pools = [[batch() for _ in range(4)] for _ in self.ends]
        turns = [0] * len(self.ends)

        def one(index: int) -> Stage:
            def stage(staged: RoundWrites, item: Any) -> None:
                before = self.ends[index]
                after = before + records
                staged.move_end(item, f"p{index}", (self.topic, index), 0, before, after, self.writer)
                data = pools[index][turns[index] % len(pools[index])]
                turns[index] += 1
                staged.batches.append((self.topic, index, before, after - 1, 0, 1, 0, before, 0, data))
                self.ends[index] = after
            return stage
        return [one(index) for index in range(len(self.ends))]


def records_batch(size: int) -> bytes:
    """About ``size`` bytes of records with random 100-byte values (uncompressed, as a producer
    without compression.type sends them)."""
    count = max(1, size // 110)
    return build_batch([Record(offset_delta=i, timestamp_delta=0, key=None, value=os.urandom(100))
                        for i in range(count)], base_timestamp=int(time.time() * 1000))


def shapes() -> dict[str, list[Stage]]:
    entries = {"seq": 0}
    payload = os.urandom(120)

    def entry(staged: RoundWrites, item: Any) -> None:
        entries["seq"] += 1
        staged.entries.append(("bench-txn-0", entries["seq"], payload))

    one = _Partitions(1)
    both = _Partitions(1)
    return {
        "txn: 1 batch of 1.1 KB": one.stage(lambda: os.urandom(1100), 10),
        "txn: 1 coordinator entry": [entry],
        "txn: batch + entry": [*both.stage(lambda: os.urandom(1100), 10), entry],
        "produce: 8 x 60 KB random": _Partitions(8).stage(lambda: os.urandom(60_000), 500),
        "produce: 8 x 460 KB random": _Partitions(8).stage(lambda: os.urandom(460_000), 4000),
        "produce: 8 x 460 KB records": _Partitions(8).stage(lambda: records_batch(460_000), 4000),
    }


def measure(conn: psycopg.Connection, postmaster: int, stages: list[Stage], rounds: int) -> dict[str, float]:
    for _ in range(WARM_UP):
        _write_round(conn, cast(Any, [_Item(s) for s in stages]), 0, 0)
    thread0, server0, wall0 = time.thread_time(), tree_cpu_s(postmaster), time.perf_counter()
    for _ in range(rounds):
        _write_round(conn, cast(Any, [_Item(s) for s in stages]), 0, 0)
    thread1, server1, wall1 = time.thread_time(), tree_cpu_s(postmaster), time.perf_counter()
    return {"client_cpu_us": round(1e6 * (thread1 - thread0) / rounds), "server_cpu_us": round(1e6 * (server1 - server0) / rounds),
            "wall_us": round(1e6 * (wall1 - wall0) / rounds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.pg_round_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", type=Path, default=Path("pg-round-cpu.json"))
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with temporary_postgres() as server:
        postmaster = server.postmaster_pid()
        with psycopg.connect(server.url, autocommit=True) as setup:
            schema.migrate(setup)
        with psycopg.connect(server.url) as conn:
            for name, stages in shapes().items():
                rounds = args.rounds if name.startswith("txn") else max(10, args.rounds // 10)
                results[name] = measure(conn, postmaster, stages, rounds)
    rows = [["round", "broker thread CPU µs", "server CPU µs", "wall µs"]]
    rows += [[name, f"{r['client_cpu_us']:,}", f"{r['server_cpu_us']:,}", f"{r['wall_us']:,}"] for name, r in results.items()]
    print(render_plain(rows))
    args.json.write_text(json.dumps({"machine": machine(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                                     "rounds": args.rounds, "results": results}, indent=2))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
