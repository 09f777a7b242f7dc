"""The Spark example pipeline (``tools/examples/spark_orders.py``) run as a user would, against a
real broker: transactional orders with every third transaction aborted, a batch job and a
streaming job (twice, resuming from its checkpoint) writing Parquet; the files hold each committed
order exactly once and no aborted one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from .broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tools" / "examples" / "spark_orders.py"
PER_TXN, ABORT_EVERY = 10, 3


def run(*args: str) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def committed_ids(orders: int) -> list[int]:
    """Order ids of the transactions the producer committed (every ABORT_EVERY-th is aborted)."""
    return [i for i in range(orders) if (i // PER_TXN + 1) % ABORT_EVERY != 0]


def ids_in(path: Path) -> list[int]:
    return sorted(pq.read_table(path).column("order_id").to_pylist())


def test_example_pipeline_writes_each_committed_order_once(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"orders-{tmp_path.name[-12:]}"
    common = ["--bootstrap", broker.bootstrap, "--topic", topic]
    produced = run("produce", *common, "--orders", "300", "--per-txn", str(PER_TXN),
                   "--abort-every", str(ABORT_EVERY))
    assert produced == {"orders": 300, "committed": len(committed_ids(300))}

    assert run("batch", *common, "--out", str(tmp_path / "batch")) == {"written": len(committed_ids(300))}
    assert ids_in(tmp_path / "batch") == committed_ids(300)

    stream_args = ["--out", str(tmp_path / "stream"), "--checkpoint", str(tmp_path / "ckpt"), "--available-now"]
    run("stream", *common, *stream_args)
    assert ids_in(tmp_path / "stream") == committed_ids(300)
    # More orders (ids 0..149 again, a second producer run), then the stream resumes from its checkpoint.
    run("produce", *common, "--orders", "150", "--per-txn", str(PER_TXN), "--abort-every", str(ABORT_EVERY))
    run("stream", *common, *stream_args)
    assert ids_in(tmp_path / "stream") == sorted(committed_ids(300) + committed_ids(150))
