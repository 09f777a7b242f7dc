"""The Spark shim on every supported Spark minor, not only the PySpark of the test environment.

The shim jar extends Spark-internal API (``PythonDataSourceV2``), compiled once against the
installed PySpark; each older minor gets a virtualenv of its own (cached in
``~/.cache/rivven_kproto/spark-venvs/<version>``, about 50 s to build from PyPI) whose
interpreter runs ``spark_minor_app.py``: literal ``format("kafka")``, a batch read and a
streaming query under read_committed, against a real broker, compared row by row with what was
committed. The newest minor is the test environment's own (``test_spark.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .broker_process import BrokerProcess
from .test_spark import PARTITIONS, REPO_ROOT, Row, fill, last_stable_offsets

MINORS = ["4.0.5", "4.1.4", "4.2.1"]
APP = Path(__file__).parent / "spark_minor_app.py"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rivven_kproto" / "spark-venvs"


def spark_venv(version: str) -> Path:
    """A virtualenv with ``pyspark==version``, pyarrow and our package's dependencies."""
    venv = CACHE / version
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    if not ready.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
        install = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"pyspark=={version}",
             "pyarrow", "-e", REPO_ROOT],
            capture_output=True, text=True, timeout=1200,
        )
        assert install.returncode == 0, f"installing PySpark {version} failed: {install.stderr[-3000:]}"
        ready.write_text(version)
    return python


def as_json_rows(rows: list[Row]) -> list[list[Any]]:
    def hex_or_none(data: bytes | None) -> str | None:
        return None if data is None else data.hex()

    return sorted([p, o, hex_or_none(k), hex_or_none(v), ts, [[hk, hex_or_none(hv)] for hk, hv in headers]]
                  for p, o, k, v, ts, headers in rows)


@pytest.mark.parametrize("version", MINORS)
def test_shim_reads_read_committed_on_spark_minor(broker: BrokerProcess, tmp_path: Path, version: str) -> None:
    python = spark_venv(version)
    topic = f"spark-minor-{version.replace('.', '-')}-{int(time.time() * 1000) % 10**8}"
    written = fill(broker, topic)
    lso = last_stable_offsets(written)
    expected = as_json_rows([r for r in written.committed + written.plain if r[1] < lso[r[0]]])
    out = tmp_path / "result.json"
    paths = [REPO_ROOT, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python),
           "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("SPARK_HOME", None)  # that minor's own jars, not another installation's
    run = subprocess.run([str(python), str(APP), broker.bootstrap, topic, str(tmp_path), str(out)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"PySpark {version}: {run.stdout[-2000:]}{run.stderr[-4000:]}"
    result = json.loads(out.read_text())
    assert result["spark"] == version
    assert result["partitions"] == PARTITIONS
    assert result["batch"] == expected
    assert result["stream"] == expected, f"PySpark {version} streaming ({result['trigger']})"
