"""What does scraping ``/metrics`` cost a producer? Issue #20: under 2% of produce throughput when
scraped every 100 ms.

    python -m tools.bench.scrape_cost [--rounds 5] [--messages 1000000] [--partitions 1,8]
                                      [--extra-partitions 0] [--encoding gzip|identity]
                                      [--json scrape-cost.json]

For each round and partition count, our broker (started with ``--metrics``, fresh for every run,
on 127.0.0.1) takes the idempotent acks=all produce workload of ``tools.bench`` twice: once
without scraping, once while a child process (``tools.bench.scrape_loop``) GETs ``/metrics``
every ``--every`` seconds; a thread in this process would take the producer's GIL and CPU, and
measure the client's cost of scraping instead of the broker's. The scraper accepts gzip, as
Prometheus does (``--encoding identity``: the plain page). The two runs
alternate their order round by round (plain first in even rounds, scraped first in odd ones), so
neither profits from running second. Printed per run: throughput side by side, scraped/plain,
the scrapes made, their size and latency; per partition count the median and geometric mean of
the ratios against the 0.98 limit (a cost under 2%).

Round-to-round noise on a small machine is several percent, larger than the cost sought, so the
tool also measures the cost directly: after each scraped run it scrapes the idle broker
``PROBE_SCRAPES`` times at the same pace and reads the broker's CPU time for them (/proc, less
the idle broker's own over as long). That CPU
per scrape, ten times a second, over the broker's CPU per second during the plain produce, is
the share of the broker's work a 100 ms scraper adds (``cpu share`` below): the throughput cost
when the broker is the bottleneck, an upper bound otherwise.

``--extra-partitions N`` creates an idle topic of N partitions first, so every scrape also
carries its per-partition series (5 per partition) - the large-cluster case.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import brokers
from . import workloads as w
from .procstats import usage

log = logging.getLogger(__name__)

LIMIT = 0.98  # scraped/plain throughput: a cost under 2%
PROBE_SCRAPES = 50


@dataclass
class Run:
    partitions: int
    scraped: bool
    msgs_per_s: float
    broker_cpu_s: float
    seconds: float
    scrapes: int = 0
    scrape_bytes: int = 0
    scrape_lines: int = 0
    scrape_p50_ms: float = 0.0
    scrape_max_ms: float = 0.0
    probe_cpu_ms_per_scrape: float = 0.0
    scrape_sent_bytes: int = 0  # gzipped unless --encoding identity
    scraper_cpu_s: float = 0.0  # the scraping process's own CPU (start-up included): the client's cost
    extra: dict[str, Any] = field(default_factory=dict)


class Scraper:
    """GETs ``url`` every ``every_s`` from a child process (``tools.bench.scrape_loop``), so the
    scraping client's CPU and GIL are not taken from the producer in this process."""

    def __init__(self, url: str, every_s: float, encoding: str = "gzip") -> None:
        self.url, self.every_s, self.encoding = url, every_s, encoding
        self.latencies_ms: list[float] = []
        self.body_bytes = 0
        self.body_lines = 0
        self.sent_bytes = 0  # as sent: gzipped when accepted
        self.errors: list[str] = []
        self.cpu_s = 0.0  # the scraper process's own, start-up included
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Scraper:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tools.bench.scrape_loop", self.url, str(self.every_s), self.encoding],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":  # scraping has begun
            self._process.kill()
            raise RuntimeError("the scraper process did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        try:
            out, _ = self._process.communicate("", timeout=30)  # stdin closed: it stops and reports
        except subprocess.TimeoutExpired:
            self._process.kill()
            raise
        report = json.loads(out)
        self.latencies_ms, self.errors = report["latencies_ms"], report["errors"]
        self.body_bytes, self.body_lines, self.cpu_s = report["bytes"], report["lines"], report["cpu_s"]
        self.sent_bytes = report["sent_bytes"]


def probe_cpu_per_scrape(running: brokers.Running, url: str, every_s: float, encoding: str) -> float:
    """The broker's CPU milliseconds per scrape at the scraper's pace: ``PROBE_SCRAPES`` scrapes
    ``every_s`` apart on the idle broker, less its CPU over as long a time without scrapes."""
    time.sleep(0.5)  # let the produce's last flush round finish
    seconds = PROBE_SCRAPES * every_s
    before = usage(running.pid).cpu_s
    time.sleep(seconds)
    idle_per_s = (usage(running.pid).cpu_s - before) / seconds
    before, began = usage(running.pid).cpu_s, time.monotonic()
    with Scraper(url, every_s, encoding) as scraper:  # the window also holds the scraper's start and stop
        time.sleep(seconds)
    busy, elapsed = usage(running.pid).cpu_s - before, time.monotonic() - began
    return max(0.0, busy - idle_per_s * elapsed) * 1000 / max(1, len(scraper.latencies_ms))


def one_run(partitions: int, scraped: bool, args: argparse.Namespace, round_: int) -> Run:
    running = brokers.Running(brokers.ours(), round_)
    try:
        url = running.metrics_url
        if url is None:
            raise RuntimeError("the broker did not log its metrics address")
        if args.extra_partitions:
            w.create_topic(running.bootstrap, "bench-idle", args.extra_partitions)
        topic = f"bench-{partitions}p"
        before = usage(running.pid).cpu_s
        if scraped:
            with Scraper(url, args.every, args.encoding) as scraper:
                figures = w.produce(running.bootstrap, topic, args.messages, partitions)
        else:
            figures = w.produce(running.bootstrap, topic, args.messages, partitions)
        cpu = usage(running.pid).cpu_s - before
        run = Run(partitions, scraped, figures.msgs_per_s, cpu, figures.seconds)
        if scraped:
            if scraper.errors:
                raise RuntimeError(f"{len(scraper.errors)} scrapes failed: {scraper.errors[:3]}")
            ordered = sorted(scraper.latencies_ms)
            run.scrapes, run.scrape_bytes, run.scrape_lines = len(ordered), scraper.body_bytes, scraper.body_lines
            run.scraper_cpu_s, run.scrape_sent_bytes = scraper.cpu_s, scraper.sent_bytes
            run.scrape_p50_ms = ordered[len(ordered) // 2] if ordered else 0.0
            run.scrape_max_ms = ordered[-1] if ordered else 0.0
            run.probe_cpu_ms_per_scrape = probe_cpu_per_scrape(running, url, args.every, args.encoding)
        log.info("round %d, %d partition(s), %s: %.0f msg/s, broker %.2f CPU-s", round_ + 1, partitions,
                 "scraped" if scraped else "plain", run.msgs_per_s, cpu)
        return run
    finally:
        running.stop()


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def summarize(pairs: dict[int, list[tuple[Run, Run]]], every_s: float) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for partitions, runs in pairs.items():
        ratios = [scraped.msgs_per_s / plain.msgs_per_s for plain, scraped in runs]
        cpu_per_s = [plain.broker_cpu_s / plain.seconds for plain, _ in runs]
        per_scrape = [scraped.probe_cpu_ms_per_scrape for _, scraped in runs]
        share = statistics.median(per_scrape) / 1000 / every_s / statistics.median(cpu_per_s)
        out[partitions] = {
            "ratios": [round(r, 4) for r in ratios], "median_ratio": round(statistics.median(ratios), 4),
            "geomean_ratio": round(geomean(ratios), 4), "min_ratio": round(min(ratios), 4),
            "max_ratio": round(max(ratios), 4),
            "plain_msgs_per_s": round(statistics.median(p.msgs_per_s for p, _ in runs)),
            "scraped_msgs_per_s": round(statistics.median(s.msgs_per_s for _, s in runs)),
            "cpu_ms_per_scrape": round(statistics.median(per_scrape), 3),
            "broker_cpu_per_s_plain": round(statistics.median(cpu_per_s), 3),
            "cpu_share": round(share, 4),
        }
    return out


def render(pairs: dict[int, list[tuple[Run, Run]]], summary: dict[int, dict[str, Any]], every_s: float) -> str:
    lines = [f"{'round':>5} {'parts':>5} {'first':>7} {'plain msg/s':>12} {'scraped msg/s':>14} {'ratio':>6} "
             f"{'scrapes':>7} {'KB':>6} {'sent':>6} {'lines':>6} {'p50 ms':>7} {'max ms':>7} {'CPU ms/scrape':>13}"]
    for partitions, runs in pairs.items():
        for index, (plain, scraped) in enumerate(runs):
            lines.append(
                f"{index + 1:>5} {partitions:>5} {'plain' if index % 2 == 0 else 'scraped':>7} "
                f"{plain.msgs_per_s:>12,.0f} {scraped.msgs_per_s:>14,.0f} {scraped.msgs_per_s / plain.msgs_per_s:>6.3f} "
                f"{scraped.scrapes:>7} {scraped.scrape_bytes / 1024:>6.1f} {scraped.scrape_sent_bytes / 1024:>6.1f} "
                f"{scraped.scrape_lines:>6} "
                f"{scraped.scrape_p50_ms:>7.2f} {scraped.scrape_max_ms:>7.2f} {scraped.probe_cpu_ms_per_scrape:>13.2f}")
    lines.append("")
    for partitions, s in summary.items():
        verdict = "met" if s["median_ratio"] >= LIMIT else "NOT met"
        lines.append(
            f"{partitions} partition(s): scraped/plain median {s['median_ratio']:.3f}, geometric mean "
            f"{s['geomean_ratio']:.3f} (range {s['min_ratio']:.3f}-{s['max_ratio']:.3f}) against the limit {LIMIT}: "
            f"{verdict}; {s['cpu_ms_per_scrape']:.2f} broker CPU-ms per scrape = {s['cpu_share']:.1%} of the "
            f"broker's CPU during the plain produce at one scrape every {every_s * 1000:.0f} ms")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.scrape_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", default="1,8", help="comma-separated partition counts of the produce")
    parser.add_argument("--every", type=float, default=0.1, help="seconds between scrapes")
    parser.add_argument("--encoding", choices=("gzip", "identity"), default="gzip",
                        help="the scraper's Accept-Encoding (Prometheus asks for gzip)")
    parser.add_argument("--extra-partitions", type=int, default=0, help="an idle topic of this many partitions")
    parser.add_argument("--json", type=Path, default=Path("scrape-cost.json"))
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("tools.bench").setLevel(logging.INFO)
    counts = [int(p) for p in args.partitions.split(",")]
    pairs: dict[int, list[tuple[Run, Run]]] = {p: [] for p in counts}
    load_at_start = os.getloadavg()  # other jobs on the machine make the throughput ratios noise
    for round_ in range(args.rounds):
        for partitions in counts:
            order = (False, True) if round_ % 2 == 0 else (True, False)  # alternate which runs first
            runs = {scraped: one_run(partitions, scraped, args, round_) for scraped in order}
            pairs[partitions].append((runs[False], runs[True]))
    summary = summarize(pairs, args.every)
    print(render(pairs, summary, args.every))
    from .__main__ import machine  # noqa: PLC0415 - the bench's machine description

    document = {"machine": machine(), "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "limit": LIMIT, "load_average": {"start": load_at_start, "end": os.getloadavg()}, "summary": {str(p): s for p, s in summary.items()},
                "runs": {str(p): [[vars(plain), vars(scraped)] for plain, scraped in runs] for p, runs in pairs.items()}}
    args.json.write_text(json.dumps(document, indent=2))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
