"""Build the Java shim jar that makes Spark's ``format("kafka")`` resolve to ``kafka_py``.

Needs a JDK (javac 17+) and PySpark (its jars are the compile class path); no Maven. Writes
``rivven_kproto/spark/jars/rivven-kproto-spark-shim.jar`` (or ``--out``).

    python tools/build_spark_shim.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rivven_kproto.spark.shim import PACKAGED_JAR, SHIM_CLASS, build_jar, jar_digest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGED_JAR)
    args = parser.parse_args()
    jar = build_jar(args.out)
    print(f"built {jar} ({jar.stat().st_size} bytes, {SHIM_CLASS}, sources {jar_digest(jar)})")


if __name__ == "__main__":
    main()
