"""Run the Spark example's verbs one after the other in one process, one command line per stdin line.

Each line is the argument list (JSON) of ``tools/examples/spark_orders.py``; its ``main`` runs
with it exactly as the command line would, and the verb's JSON answer is printed on one line. The
verbs' ``spark.stop()`` ends each session, but the JVM stays up, so only the first Spark verb
pays for starting one (a JVM start is the bulk of a verb's time on a busy 2-core machine).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "tools" / "examples" / "spark_orders.py"


def main() -> int:
    spec = importlib.util.spec_from_file_location("spark_orders", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for line in sys.stdin:
        if not line.strip():
            continue
        code = example.main(json.loads(line))
        if code:
            return int(code)
        sys.stdout.flush()  # the verb printed its answer: the test waits for it
    return 0


if __name__ == "__main__":
    sys.exit(main())
