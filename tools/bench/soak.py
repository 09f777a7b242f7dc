"""The long exactly-once soak: ``kproto verify-eos`` against our broker under faults, per storage
engine and client library, its figures side by side (operations, faults injected, anomalies).

    python -m tools.bench.soak --transactions 1000 --json benchmarks/results/soak.json

Each run starts its own broker through ``--broker-cmd`` (so verify-eos can SIGKILL and SIGSTOP it)
behind verify-eos's cutting proxy, on a fresh data directory, or a fresh database of one throwaway
PostgreSQL server for ``postgresql``. The test suite runs a short version of the same
(``compat_tests/test_verify_eos.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .brokers import free_port

STORAGES = ("native", "postgresql")
CLIENTS = ("confluent-kafka", "kafka-python")


@contextlib.contextmanager
def _database_urls(storages: list[str]) -> Iterator[Any]:
    """A factory of fresh database URLs, backed by one throwaway server when PostgreSQL is asked for."""
    if "postgresql" not in storages:
        yield None
        return
    from rivven_kproto.testing.postgres import create_database, temporary_postgres

    with temporary_postgres() as server:
        yield lambda: create_database(server)


def soak_once(storage: str, client: str, args: argparse.Namespace, new_database: Any, work: Path) -> dict[str, Any]:
    port, proxy = free_port(), free_port()
    data = work / f"{storage}-{client}"
    serve = (f"{sys.executable} -m rivven_kproto serve --listen 127.0.0.1:{port} --data-dir {data} "
             f"--advertised-listener 127.0.0.1:{proxy}")
    if storage == "postgresql":
        serve += f" --storage {new_database()}"
    command = [
        sys.executable, "-m", "rivven_kproto", "--format", "json", "verify-eos", "--bootstrap", f"127.0.0.1:{port}",
        "--transactions", str(transactions_for(client, args)), "--seed", str(args.seed), "--client", client,
        "--kill-rate", str(args.kill_rate), "--pause-rate", str(args.pause_rate), "--proxy", f"127.0.0.1:{proxy}",
        "--cut-rate", str(args.cut_rate), "--broker-cmd", serve, "--history", str(work / f"{storage}-{client}.json"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                            timeout=args.timeout)
    out = result.stdout
    if "{" not in out:
        raise SystemExit(f"verify-eos ({storage}, {client}) printed no verdict:\n{result.stderr[-3000:]}")
    doc = json.loads(out[out.index("{"):])
    doc.update(storage=storage, exit_code=result.returncode, transactions_planned=transactions_for(client, args))
    return doc


def transactions_for(client: str, args: argparse.Namespace) -> int:
    """kafka-python is pure Python and several times slower per transaction: it may run fewer."""
    if client == "kafka-python" and args.kafka_python_transactions is not None:
        return int(args.kafka_python_transactions)
    return int(args.transactions)


def row(doc: dict[str, Any]) -> str:
    faults = doc["faults"]
    txns = doc["transactions"]
    anomalies = sum(check["count"] for check in doc["checks"].values())
    return (f"{doc['storage']:<10} {doc['client']:<15} {doc['seconds']:>7.0f} {txns.get('committed', 0):>9} "
            f"{txns.get('aborted', 0):>7} {doc['committed_records']:>8} {doc['reads_during_run']:>8} "
            f"{doc['transformed_outputs']:>7} {faults.get('broker_kills', 0):>5} {faults.get('broker_pauses', 0):>6} "
            f"{faults.get('connection_cuts', 0):>4} {faults.get('producer_restarts', 0):>8} "
            f"{faults.get('transform_restarts', 0):>9} {anomalies:>9}  {'PASS' if doc['passed'] else 'FAIL'}")


HEADER = (f"{'storage':<10} {'client':<15} {'seconds':>7} {'committed':>9} {'aborted':>7} {'records':>8} "
          f"{'reads':>8} {'outputs':>7} {'kills':>5} {'pauses':>6} {'cuts':>4} {'restarts':>8} {'stage rst':>9} "
          f"{'anomalies':>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=1000)
    parser.add_argument("--kafka-python-transactions", type=int, help="for the kafka-python runs (default: --transactions)")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--storages", default=",".join(STORAGES))
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--kill-rate", type=float, default=0.03)
    parser.add_argument("--pause-rate", type=float, default=0.02)
    parser.add_argument("--cut-rate", type=float, default=0.04)
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per run")
    parser.add_argument("--json", type=Path, help="write every run's verdict here")
    args = parser.parse_args()
    storages = [s for s in args.storages.split(",") if s]
    clients = [c for c in args.clients.split(",") if c]
    runs = []
    print(f"seed {args.seed}, {args.transactions} transactions per run", flush=True)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="kproto-soak-") as tmp, _database_urls(storages) as new_database:
        for storage in storages:
            for client in clients:
                doc = soak_once(storage, client, args, new_database, Path(tmp))
                runs.append(doc)
                print(row(doc), flush=True)
                if args.json is not None:  # after every run, so a long soak cut short keeps what it did
                    args.json.write_text(json.dumps({"seed": args.seed, "runs": runs}, indent=1, sort_keys=True))
    sys.exit(0 if all(doc["passed"] for doc in runs) else 1)


if __name__ == "__main__":
    main()
