"""``kproto verify-eos`` as a user runs it, against our broker under faults (the issue #14 soak).

The workload's transactional producers and zombies are real confluent-kafka or kafka-python
clients, its read_committed consumers confluent-kafka; the broker is started by verify-eos itself from ``--broker-cmd`` so it can
SIGKILL and SIGSTOP it, and ``--proxy`` puts a TCP proxy in front whose connections it cuts.
Every check must report zero anomalies. ``VERIFY_EOS_SEED`` replays a run;
``VERIFY_EOS_TRANSACTIONS`` makes it longer.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_verify(*args: str, timeout: float = 900) -> tuple[int, dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "--format", "json", "verify-eos", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    out = result.stdout
    assert "{" in out, f"verify-eos printed no verdict (exit {result.returncode}):\n{result.stderr[-4000:]}"
    return result.returncode, json.loads(out[out.index("{"):]), result.stderr


# kafka-python runs without broker faults here: under them, a cut connection at the wrong instant
# makes it drop a transactional request and wait forever (a client bug, FINDINGS.rst); verify-eos
# reports that as a named client bug after the call's bound of two minutes, too slow for the suite.
# The soak (tools/bench/soak.py) runs kafka-python under faults instead.
FAULTS = ["--kill-rate", "0.05", "--pause-rate", "0.03", "--cut-rate", "0.06"]
NO_FAULTS = ["--kill-rate", "0", "--pause-rate", "0", "--cut-rate", "0"]


@pytest.mark.slow
@pytest.mark.parametrize(("client", "faults"), [("confluent-kafka", FAULTS), ("kafka-python", NO_FAULTS)],
                         ids=["confluent-kafka-faults", "kafka-python"])
def test_verify_eos_passes_against_our_broker_under_faults(tmp_path: Path, client: str, faults: list[str]) -> None:
    seed = int(os.environ.get("VERIFY_EOS_SEED", random.randrange(1 << 30)))
    transactions = os.environ.get("VERIFY_EOS_TRANSACTIONS", "60")
    port, proxy = free_port(), free_port()
    serve = (
        f"{sys.executable} -m rivven_kproto serve --listen 127.0.0.1:{port} --data-dir {tmp_path / 'data'} "
        f"--advertised-listener 127.0.0.1:{proxy}"
    )
    args = ["--bootstrap", f"127.0.0.1:{port}", "--transactions", transactions, "--seed", str(seed),
            *faults, "--proxy", f"127.0.0.1:{proxy}", "--history", str(tmp_path / "history.json"), "--client", client]
    code, doc, stderr = run_verify(*args, "--broker-cmd", serve)
    failed = {name: check for name, check in doc["checks"].items() if check["count"]}
    assert code == 0 and doc["passed"], f"seed {seed} (VERIFY_EOS_SEED): {failed}\n{stderr[-3000:]}"
    assert doc["committed_records"] > 0 and doc["transactions"]["committed"] > 0
    assert doc["reads_during_run"] > 0
    if faults is FAULTS:
        assert doc["faults"]["broker_kills"] + doc["faults"]["broker_pauses"] + doc["faults"]["connection_cuts"] > 0
    assert doc["client"] == client

    # The saved history replays to the same verdict; a tampered one (a committed record lost) fails.
    history = json.loads((tmp_path / "history.json").read_text())
    code, again, _ = run_verify("--replay", str(tmp_path / "history.json"))
    assert code == 0 and again["checks"] == doc["checks"]
    lost = history["final_committed"].pop()
    (tmp_path / "tampered.json").write_text(json.dumps(history))
    code, tampered, _ = run_verify("--replay", str(tmp_path / "tampered.json"))
    assert code == 1 and not tampered["passed"]
    assert tampered["checks"]["lost_write"]["count"] == 1 and lost["value"] in tampered["checks"]["lost_write"]["examples"][0]
