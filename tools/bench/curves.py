"""python -m tools.bench.curves: how cost grows with the work, ours beside a peer, as PNG charts.

    python -m tools.bench.curves --peer tansu                    # partitions and message size
    python -m tools.bench.curves --peer tansu --peer postgresql --partitions 10000 --sizes ''

Two curves (issue #22's "cost curves"), each point on a fresh broker of each kind:

* partitions (1, 100, 1,000, 10,000): produce to all of them (acks=all, idempotent), the latency
  of a Metadata request for that topic (median and p99 of 50 round trips on one connection, our
  codec's request), and a read_uncommitted consume of everything from all of them;
* message size (100 B, 1 KiB, 16 KiB, 1 MiB): produce and consume MB/s of the same number of
  bytes per size.

A point a broker cannot run (for example more partitions than its open-files limit allows) is
recorded with its error and left out of the chart. Prints a table, writes the figures to JSON
(``--json``) and one PNG per curve into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from . import brokers
from . import workloads as w

log = logging.getLogger("tools.bench.curves")

PARTITIONS = (1, 100, 1_000, 10_000)
SIZES = (100, 1024, 16 * 1024, 1024 * 1024)
METADATA_ROUNDS = 50


def metadata_latency(bootstrap: str, topic: str, rounds: int = METADATA_ROUNDS) -> dict[str, float]:
    """Round trips of a Metadata request for ``topic`` on one connection (ms): median, p99."""
    host, port = bootstrap.rsplit(":", 1)
    samples: list[float] = []
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        for correlation in range(rounds):
            frame = w.metadata_frame(topic, correlation, "curves")
            started = time.perf_counter()
            sock.sendall(frame)
            (length,) = struct.unpack(">i", w._read_exactly(sock, 4))
            answer = w._read_exactly(sock, length)
            samples.append((time.perf_counter() - started) * 1000)
            if correlation == 0:
                found = [t for t in w.decode_metadata(answer).topics if t.name == topic]
                assert found and found[0].error_code == 0, f"Metadata for {topic}: {found}"
    samples.sort()
    return {"metadata_p50_ms": statistics.median(samples),
            "metadata_p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))]}


def partitions_point(bootstrap: str, partitions: int, messages: int) -> dict[str, Any]:
    topic = f"curve-p{partitions}"
    produced = w.produce(bootstrap, topic, messages, partitions)
    point: dict[str, Any] = {"produce_msgs_per_s": produced.msgs_per_s}
    point.update(metadata_latency(bootstrap, topic))
    consumed = w.consume(bootstrap, topic, messages + partitions, partitions, "read_uncommitted")
    point["consume_msgs_per_s"] = consumed.msgs_per_s
    return point


def size_point(bootstrap: str, size: int, total_bytes: int) -> dict[str, Any]:
    topic = f"curve-s{size}"
    count = max(total_bytes // size, 50)
    # Messages near 1 MiB need room over Kafka's and librdkafka's 1 MB defaults, on both sides.
    limit = str(max(2 * size, 1 << 20) + 4096)
    big = {"message.max.bytes": limit} if size >= 512 * 1024 else None
    topic_config = {"max.message.bytes": limit} if big else None
    produced = w.produce(bootstrap, topic, count, 1, size=size, client=big, topic_config=topic_config)
    consumed = w.consume(bootstrap, topic, count + 1, 1, "read_uncommitted", size=size,
                         client={"fetch.max.bytes": limit, "max.partition.fetch.bytes": limit} if big else None)
    return {"produce_mb_per_s": produced.mb_per_s,
            "consume_mb_per_s": consumed.mb_per_s, "messages": count}


def on_fresh_broker(target: brokers.Target, run: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    running = brokers.Running(target, 0)
    try:
        return run(running.bootstrap)
    except Exception as exc:  # noqa: BLE001 - a point a broker cannot run is a result, not a crash
        log.warning("%s: %s", target.name, exc)
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        running.stop()


def chart(path: Path, title: str, xlabel: str, xs: list[int], series: dict[str, dict[str, list[float | None]]],
          metrics: list[tuple[str, str]], log_x: bool = True,
          references: dict[str, dict[str, float | None]] | None = None) -> None:
    """One PNG: a panel per metric, a line per broker (log x axis unless ``log_x`` is false), and
    a dashed horizontal line per ``references`` entry (a figure measured once, not along x)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.8))
    for ax, (key, label) in zip(axes, metrics, strict=True):
        for broker, values in series.items():
            points = [(x, y) for x, y in zip(xs, values[key], strict=True) if y is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=broker)
        for name, figures in (references or {}).items():
            if figures.get(key) is not None:
                ax.axhline(figures[key], linestyle="--", color="grey", label=name)
        if log_x:
            ax.set_xscale("log")
        else:
            ax.set_xticks(xs)
            ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel)
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.curves", description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="append", default=[],
                        help="'tansu', 'postgresql' or a command line with {port} (see python -m tools.bench); repeatable")
    parser.add_argument("--partitions", default=",".join(map(str, PARTITIONS)))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--messages", type=int, default=200_000, help="per partitions point")
    parser.add_argument("--bytes", type=int, default=100 * 1024 * 1024, help="per message-size point")
    parser.add_argument("--out", type=Path, default=Path("tools/bench"))
    parser.add_argument("--json", type=Path, default=Path("curves-results.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    targets = [brokers.ours(), *(brokers.peer(spec) for spec in args.peer)]
    counts = [int(x) for x in args.partitions.split(",") if x]
    sizes = [int(x) for x in args.sizes.split(",") if x]
    results: dict[str, Any] = {"partitions": {}, "sizes": {}}
    for count in counts:
        for target in targets:
            point = on_fresh_broker(target, partial(partitions_point, partitions=count, messages=args.messages))
            results["partitions"].setdefault(target.name, {})[str(count)] = point
            log.info("%s partitions=%d: %s", target.name, count, point)
    for size in sizes:
        for target in targets:
            point = on_fresh_broker(target, partial(size_point, size=size, total_bytes=args.bytes))
            results["sizes"].setdefault(target.name, {})[str(size)] = point
            log.info("%s size=%d: %s", target.name, size, point)
    args.json.write_text(json.dumps(results, indent=1))

    def series(curve: str, xs: list[int], keys: list[str]) -> dict[str, dict[str, list[float | None]]]:
        return {broker: {k: [points.get(str(x), {}).get(k) for x in xs] for k in keys}
                for broker, points in results[curve].items()}

    args.out.mkdir(parents=True, exist_ok=True)
    p_metrics = [("produce_msgs_per_s", "produce to all, msg/s"), ("metadata_p99_ms", "Metadata p99, ms"),
                 ("consume_msgs_per_s", "consume from all, msg/s")]
    s_metrics = [("produce_mb_per_s", "produce, MB/s"), ("consume_mb_per_s", "consume, MB/s")]
    if counts:
        chart(args.out / "curve-partitions.png", "Cost against partitions", "partitions", counts,
              series("partitions", counts, [k for k, _ in p_metrics]), p_metrics)
    if sizes:
        chart(args.out / "curve-message-size.png", "Cost against message size", "message size (bytes)", sizes,
              series("sizes", sizes, [k for k, _ in s_metrics]), s_metrics)
    for curve, xs, metrics in (("partitions", counts, p_metrics), ("sizes", sizes, s_metrics)):
        for broker, points in results[curve].items():
            for x in xs:
                point = points.get(str(x), {})
                cells = [f"{k}={point[k]:.2f}" for k, _ in metrics if isinstance(point.get(k), float | int)]
                print(f"{curve:10} {broker:14} {x:>8}  {' '.join(cells) or point.get('error', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
