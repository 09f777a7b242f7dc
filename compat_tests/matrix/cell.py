"""Run one cell in this process: ``python -m compat_tests.matrix.cell '<json spec>'``.

The runner starts one such process per cell, so a hung client can be killed at the cell's timeout
and no client state leaks between cells. The outcome is the last stdout line starting with
``MATRIX-RESULT``; everything else a client prints is ignored (and kept for timeouts).
``--batch '<json list of specs>'`` runs several cells one after the other in this process (the
JVM clients' cells share one Spark session: starting one per cell was most of the matrix's time),
one ``MATRIX-RESULT`` line each, carrying its index in the list.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

from .clients import load
from .model import FAIL, PASS, Ctx, ScenarioFailure, describe_error
from .scenarios import SCENARIOS

MARKER = "MATRIX-RESULT "


def run(spec: dict) -> dict:
    started = time.monotonic()
    ctx = Ctx(
        bootstrap=spec["bootstrap"],
        topics=spec["topics"],
        unique=spec["unique"],
        timeout_s=spec["timeout_s"],
        started=started,
        security=spec.get("security", {}),
        plain_bootstrap=spec.get("plain_bootstrap", ""),
    )
    try:
        client = load(spec["client"])
        detail = SCENARIOS[spec["capability"]].run(client.adapter, ctx)
        status = PASS
    except ScenarioFailure as exc:
        status, detail = FAIL, str(exc)
    except Exception as exc:  # noqa: BLE001 - the outcome carries every error
        status, detail = FAIL, describe_error(exc)
        traceback.print_exc()
    return {"status": status, "detail": detail, "duration_s": time.monotonic() - started}


def main() -> None:
    if sys.argv[1] == "--batch":
        for index, spec in enumerate(json.loads(sys.argv[2])):
            result = run(spec)
            sys.stdout.flush()
            print(MARKER + json.dumps({**result, "index": index}), flush=True)
        return
    result = run(json.loads(sys.argv[1]))
    sys.stdout.flush()
    print(MARKER + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
