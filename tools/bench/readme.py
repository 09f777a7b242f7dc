"""python -m tools.bench.readme: the README's performance summary, generated from the results file
it names, so the figures a newcomer reads are the ones a run wrote.

    python -m tools.bench.readme --write     # regenerate README.rst's summary from its results file
    python -m tools.bench.readme --check     # exit 1 if README.rst differs from what it would write

The summary sits between two comment lines of README.rst; the first names the results file
(written by ``python -m tools.bench --peer tansu --json FILE``)::

    .. bench-summary-start: benchmarks/results/2026-11-29.json
    .. bench-summary-end

``tests/tools/test_bench_readme.py`` fails when the README and its results file disagree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .report import NULL, OURS, render_rst

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.rst"
START = re.compile(r"^\.\. bench-summary-start: (?P<path>\S+)\n", re.M)
END = ".. bench-summary-end\n"
# (workload, the figure compared, its unit in the table)
ROWS = (
    ("produce-1p", "msgs_per_s", "msg/s"), ("produce-8p", "msgs_per_s", "msg/s"),
    ("consume-uncommitted", "msgs_per_s", "msg/s"), ("consume-committed", "msgs_per_s", "msg/s"),
    ("transactions", "txn_per_s", "txn/s"), ("transactions-16p", "txn_per_s", "txn/s"),
)


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def render(document: dict[str, Any], source: str) -> str:
    """The summary's text (without the marker lines) for one ``python -m tools.bench`` results file."""
    machine, summary = document["machine"], document["summary"]
    peer = next((b for b in document["rounds"] if b not in (OURS, NULL)), None)
    if peer is None:
        raise ValueError(f"{source} has no peer broker: run python -m tools.bench --peer tansu")
    versions = machine.get("versions", {})
    load = machine.get("load_average")
    lines = [
        f"``python -m tools.bench --peer {peer}``, {document['settings']['rounds']} rounds, {machine['date'][:10]},"
        f" commit {machine.get('commit') or 'not recorded'}, {machine['cpus']} cores, load average"
        f" {' / '.join(map(str, load)) if load else 'not recorded'} at the end; librdkafka"
        f" {versions.get('librdkafka')}, {peer} {versions.get(peer, '')}; medians from ``{source}``:",
        "",
    ]
    header = ["workload", "ours", peer, "null broker", f"ours / {peer}", "ours / null", f"broker CPU-s ours / {peer}"]
    rows = [header]
    for name, key, unit in ROWS:
        row = summary.get(name)
        if not row or OURS not in row:
            continue
        ours, theirs, null = (row.get(b, {}) for b in (OURS, peer, NULL))
        cpu = (f"{ours['broker_cpu_s']:.2f} / {theirs['broker_cpu_s']:.2f}"
               if ours.get("broker_cpu_s") is not None and theirs.get("broker_cpu_s") is not None else "")
        rows.append([f"{name} ({unit})", _rate(ours.get(key)), _rate(theirs.get(key)), _rate(null.get(key)),
                     _ratio(row, "vs_peer"), _ratio(row, "vs_null"), cpu])
    lines += [render_rst(rows), ""]
    goals = [g for g in document["goals"] if g["goal"].startswith("#40 ")]
    if goals:
        met = sum(1 for g in goals if g["met"])
        lines += [f"Issue #40's goals in this run: {met} of {len(goals)} met; each one, and why each missed one is"
                  " missed, in `benchmarks <docs/benchmarks.rst>`_.", ""]
    return "\n".join(lines)


def _ratio(row: dict[str, Any], key: str) -> str:
    ratio = row.get(key)
    return "" if not ratio else f"{ratio['median']}x"


def expected(readme: str, root: Path = ROOT) -> tuple[str, int, int]:
    """(the summary README's results file gives, start and end offsets of the current text)."""
    start = START.search(readme)
    end = readme.find(END, start.end()) if start else -1
    if start is None or end < 0:
        raise ValueError("README.rst has no bench-summary-start/-end lines")
    source = start.group("path")
    document = json.loads((root / source).read_text())
    return "\n" + render(document, source) + "\n", start.end(), end


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.readme", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true")
    action.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    readme = README.read_text()
    text, start, end = expected(readme)
    if args.check:
        if readme[start:end] != text:
            print("README.rst's performance summary differs from its results file: "
                  "python -m tools.bench.readme --write", file=sys.stderr)
            return 1
        return 0
    README.write_text(readme[:start] + text + readme[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
