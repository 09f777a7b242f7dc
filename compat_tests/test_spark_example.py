"""The Spark example pipeline (``tools/examples/spark_orders.py``) run as a user would, against a
real broker: transactional orders with every third transaction aborted, a batch job and a
streaming job (twice, resuming from its checkpoint) writing Parquet; the files hold each committed
order exactly once and no aborted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pyarrow.parquet as pq
import pytest

from .broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tools" / "examples" / "spark_orders.py"
PER_TXN, ABORT_EVERY = 10, 3
STEP_TIMEOUT_S = 300


def _env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def run(*args: str) -> dict:
    """The example's command line as a user runs it, its own process."""
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], env=_env(), capture_output=True, text=True,
                          timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class Steps:
    """The example's Spark verbs, each its command line's ``main`` run in one long-lived process
    (``spark_example_steps.py``), so that one JVM serves them all."""

    def __init__(self, log: Path) -> None:
        self.log_path = log
        self.log: IO[bytes] = log.open("wb")
        self.process = subprocess.Popen([sys.executable, "-m", "compat_tests.spark_example_steps"], cwd=ROOT,
                                        env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, start_new_session=True)

    def run(self, *args: str) -> dict:
        """Send one verb's arguments; its JSON answer (the JVM may print other lines on stdout)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(list(args)) + "\n")
        self.process.stdin.flush()
        watchdog = threading.Timer(STEP_TIMEOUT_S, self.kill)
        watchdog.start()
        try:
            for line in self.process.stdout:
                if line.startswith("{"):
                    return json.loads(line)
        finally:
            watchdog.cancel()
        raise AssertionError(f"{args[0]} gave no answer (exit {self.process.poll()}):\n"
                             f"{self.log_path.read_text(errors='replace')[-3000:]}")

    def kill(self) -> None:
        """The runner's whole process group: its JVM too."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            assert self.process.wait(STEP_TIMEOUT_S) == 0, self.log_path.read_text(errors="replace")[-3000:]
        finally:
            self.kill()
            self.process.wait(STEP_TIMEOUT_S)
            self.log.close()


@pytest.fixture
def steps(tmp_path: Path) -> Iterator[Steps]:
    runner = Steps(tmp_path / "spark-steps.log")
    try:
        yield runner
    finally:
        runner.close()


def committed_ids(orders: int) -> list[int]:
    """Order ids of the transactions the producer committed (every ABORT_EVERY-th is aborted)."""
    return [i for i in range(orders) if (i // PER_TXN + 1) % ABORT_EVERY != 0]


def ids_in(path: Path) -> list[int]:
    return sorted(pq.read_table(path).column("order_id").to_pylist())


def test_example_pipeline_writes_each_committed_order_once(broker: BrokerProcess, tmp_path: Path,
                                                          steps: Steps) -> None:
    topic = f"orders-{tmp_path.name[-12:]}"
    common = ["--bootstrap", broker.bootstrap, "--topic", topic]
    produced = run("produce", *common, "--orders", "300", "--per-txn", str(PER_TXN),
                   "--abort-every", str(ABORT_EVERY))
    assert produced == {"orders": 300, "committed": len(committed_ids(300))}

    assert steps.run("batch", *common, "--out", str(tmp_path / "batch")) == {"written": len(committed_ids(300))}
    assert ids_in(tmp_path / "batch") == committed_ids(300)

    stream_args = ["--out", str(tmp_path / "stream"), "--checkpoint", str(tmp_path / "ckpt"), "--available-now"]
    steps.run("stream", *common, *stream_args)
    assert ids_in(tmp_path / "stream") == committed_ids(300)
    # More orders (ids 0..149 again, a second producer run), then the stream resumes from its checkpoint.
    run("produce", *common, "--orders", "150", "--per-txn", str(PER_TXN), "--abort-every", str(ABORT_EVERY))
    steps.run("stream", *common, *stream_args)
    assert ids_in(tmp_path / "stream") == sorted(committed_ids(300) + committed_ids(150))
