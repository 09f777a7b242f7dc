"""Bulk CLI speed: ``kproto produce`` and ``kproto consume -e`` against kcat, side by side (#41).

    python -m tools.bench.cli_bulk [--lines 300000] [--line-bytes 77] [--rounds 3] [--json out.json]

Each round starts our broker afresh and writes a file of ``--lines`` lines (about ``--line-bytes``
each, 300,000 of 77 bytes: the issue's 23 MB). Then both tools send the file to a topic of one
partition of their own (``kproto produce T < file``, ``kcat -P -b B -t T -p 0 < file``) and read
it back to a file (``kproto consume T --from-beginning -e``, ``kcat -C -b B -t T -o beginning
-e -q``), each timed from process start to exit (start-up included, as a user waits for it) with
its own CPU. The tools take turns going first, round by round. Every read must return exactly the
lines written, in order, or the run fails. Per direction the median seconds of each tool and
kproto/kcat are printed; the goal is kproto within 2x of kcat both ways.

kproto runs with its bytecode cached, as after ``pip install`` (which compiles it): in a private
``PYTHONPYCACHEPREFIX`` (even where ``PYTHONDONTWRITEBYTECODE`` is set), warmed by an untimed
produce and consume of a few lines each round.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import brokers

log = logging.getLogger(__name__)

GOAL = 2.0  # kproto's seconds over kcat's, at most
DIRECTIONS = ("produce", "consume")
TOOLS = ("kproto", "kcat")
RUN_TIMEOUT_S = 600


def write_lines(path: Path, lines: int, line_bytes: int, seed: int = 1) -> None:
    """``lines`` distinct lines of ``line_bytes`` bytes (newline included) of printable ASCII."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    filler = max(line_bytes - 14, 0)  # "line-NNNNNNN " and the newline
    with path.open("w") as out:
        for number in range(lines):
            out.write(f"line-{number:07d} " + "".join(rng.choices(alphabet, k=filler)) + "\n")


def timed(command: list[str], stdin: Path, stdout: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``command`` with these files as stdin and stdout: wall seconds and its CPU seconds."""
    with stdin.open("rb") as source, stdout.open("wb") as sink:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=source, stdout=sink, stderr=subprocess.PIPE,
                                   cwd=Path(__file__).resolve().parents[2], env=env)
        assert process.stderr is not None
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        stderr = process.stderr.read().decode(errors="replace")
        process.stderr.close()
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command[:4]} exited with {process.returncode}: {stderr[-2000:]}")
    return {"seconds": round(seconds, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)}


def commands(bootstrap: str, topic: str) -> dict[str, dict[str, list[str]]]:
    kproto = [sys.executable, "-m", "rivven_kproto", "--bootstrap", bootstrap]
    kcat = ["kcat", "-b", bootstrap, "-t", topic]
    return {
        "kproto": {"produce": [*kproto, "produce", topic],
                   "consume": [*kproto, "consume", topic, "--from-beginning", "-e"]},
        "kcat": {"produce": [*kcat, "-P", "-p", "0"], "consume": [*kcat, "-C", "-o", "beginning", "-e", "-q"]},
    }


def kproto_env(work: Path) -> dict[str, str]:
    """The environment kproto runs in: bytecode cached (in ``work``), as an installed package's is."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def one_round(number: int, lines_file: Path, work: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Both tools, both directions, against a fresh broker; the tool going first alternates."""
    running = brokers.Running(brokers.ours(), number)
    env = kproto_env(work)
    try:
        warm = commands(running.bootstrap, "bulk-warm-up")["kproto"]
        few = work / "few.txt"
        few.write_text("warm\nup\n")
        timed(warm["produce"], few, work / "warm.out", env)
        timed(warm["consume"], Path(os.devnull), work / "warm.out", env)
        order = TOOLS if number % 2 == 0 else TOOLS[::-1]
        result: dict[str, dict[str, dict[str, float]]] = {direction: {} for direction in DIRECTIONS}
        for tool in order:
            topic = f"bulk-{tool}-{number}"
            create = [sys.executable, "-m", "rivven_kproto", "--bootstrap", running.bootstrap, "topics", "create",
                      topic, "--partitions", "1"]
            subprocess.run(create, check=True, capture_output=True, timeout=RUN_TIMEOUT_S)
            argv = commands(running.bootstrap, topic)[tool]
            tool_env = env if tool == "kproto" else None
            result["produce"][tool] = timed(argv["produce"], lines_file, work / f"{tool}-produce.out", tool_env)
            read_back = work / f"{tool}-consume.out"
            result["consume"][tool] = timed(argv["consume"], Path(os.devnull), read_back, tool_env)
            if read_back.read_bytes() != lines_file.read_bytes():
                raise RuntimeError(f"{tool} read back something else than the {lines_file.name} it wrote")
        return result
    finally:
        running.stop()


def summarize(rounds: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, dict[str, float]]:
    """Per direction: each tool's median seconds and CPU, and kproto/kcat of the medians."""
    summary: dict[str, dict[str, float]] = {}
    for direction in DIRECTIONS:
        row: dict[str, float] = {}
        for tool in TOOLS:
            row[f"{tool}_s"] = round(statistics.median(r[direction][tool]["seconds"] for r in rounds), 3)
            row[f"{tool}_cpu_s"] = round(statistics.median(r[direction][tool]["cpu_s"] for r in rounds), 3)
        row["ratio"] = round(row["kproto_s"] / row["kcat_s"], 2) if row["kcat_s"] else 0.0
        summary[direction] = row
    return summary


def table_rows(document: dict[str, Any]) -> list[list[str]]:
    """The summary as table rows (also the docs' table): header first."""
    rows = [["direction", "kproto (s)", "kcat (s)", "kproto/kcat", f"goal <= {GOAL:g}x", "kproto CPU (s)", "kcat CPU (s)"]]
    for direction, row in document["summary"].items():
        rows.append([
            direction, f"{row['kproto_s']:.2f}", f"{row['kcat_s']:.2f}", f"{row['ratio']:.2f}x",
            "met" if row["ratio"] <= GOAL else "missed", f"{row['kproto_cpu_s']:.2f}", f"{row['kcat_cpu_s']:.2f}",
        ])
    return rows


def render_text(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def render_rst(rows: list[list[str]]) -> str:
    """A list-table of the rows (for the documentation's benchmark page)."""
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in rows:
        out.append(f"   * - {row[0]}")
        out.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--line-bytes", type=int, default=77)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="Write the figures here.")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if shutil.which("kcat") is None:
        parser.error("kcat is not installed (apt-get install kcat)")
    with tempfile.TemporaryDirectory(prefix="cli-bulk-") as scratch:
        work = Path(scratch)
        lines_file = work / "lines.txt"
        write_lines(lines_file, options.lines, options.line_bytes)
        rounds = []
        for number in range(options.rounds):
            rounds.append(one_round(number, lines_file, work))
            log.info("round %d: %s", number + 1, json.dumps(rounds[-1], sort_keys=True))
        size = lines_file.stat().st_size
    document = {
        "run": {"lines": options.lines, "bytes": size, "rounds": options.rounds, "goal": GOAL,
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
                "load_average": os.getloadavg()[0]},
        "rounds": rounds,
        "summary": summarize(rounds),
    }
    print(f"{options.lines} lines ({size / 1e6:.1f} MB), median of {options.rounds} rounds:")
    print(render_text(table_rows(document)))
    if options.json is not None:
        options.json.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
