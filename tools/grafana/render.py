"""Render the Grafana dashboard's panels from a real run, as a PNG (no Grafana needed).

    python -m tools.grafana.render [--seconds 60] [--out tools/grafana/dashboard.png]

Starts our broker with ``--metrics`` in a temporary data directory and runs a small mixed
workload against it with confluent-kafka: an idempotent producer, transactions that commit and
abort, one transaction left open for a while, and a consumer group that reads slower than the
producer writes (so it lags). The broker's ``/metrics`` is scraped every second; each panel of
``rivven_kproto.json`` is evaluated over those scrapes (``promql.py``: the subset of PromQL the
dashboard uses) and drawn where the dashboard places it. A run is short, so ``rate`` windows are
capped (``--window``, 10 s) instead of the dashboard's 1-5 minutes; panels in seconds use a log
scale and show their eight highest series. Bounded: ``--seconds`` of workload, every client call
with a timeout.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from .promql import Labels, Scrape, cap_windows, evaluate

DASHBOARD = Path(__file__).with_name("rivven_kproto.json")
READY = re.compile(rb"listening on [\d.]+:(\d+) advertised as")
METRICS = re.compile(rb"metrics on (http://[\d.]+:\d+)/metrics")
TIMEOUT_S = 30


def start_broker(data_dir: str, log_path: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "rivven_kproto", "serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0",
         "--metrics", "127.0.0.1:0"], stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        text = log_path.read_bytes()
        ready, metrics = READY.search(text), METRICS.search(text)
        if ready and metrics:
            return process, f"127.0.0.1:{int(ready.group(1))}", metrics.group(1).decode() + "/metrics"
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the broker did not start:\n{log_path.read_text()}")


def scrape(url: str, at: float) -> Scrape:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
        text = answer.read().decode()
    samples: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scrape(at, samples)


def workload(bootstrap: str, stop: threading.Event, errors: list[str]) -> list[threading.Thread]:
    """The clients, each on its own thread until ``stop``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 3, 1), NewTopic("invoices", 1, 1)]).values():
        future.result(TIMEOUT_S)

    def guarded(run):  # type: ignore[no-untyped-def]
        def body() -> None:
            try:
                run()
            except Exception as exc:  # reported by the caller; the others go on
                errors.append(f"{run.__name__}: {exc!r}")
        return threading.Thread(target=body, daemon=True)

    def orders() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        n = 0
        while not stop.is_set():
            for _ in range(200):
                producer.produce("orders", f"order-{n}".encode(), key=str(n % 50).encode())
                n += 1
            producer.flush(TIMEOUT_S)
            time.sleep(0.05)

    def invoices() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "render-invoices", "linger.ms": 1})
        producer.init_transactions(TIMEOUT_S)
        n = 0
        while not stop.is_set():
            producer.begin_transaction()
            for _ in range(5):
                producer.produce("invoices", f"invoice-{n}".encode())
            n += 1
            if n % 4 == 0:
                producer.flush(TIMEOUT_S)  # sent first: else the client aborts alone, the broker never sees it
                producer.abort_transaction(TIMEOUT_S)
            else:
                producer.commit_transaction(TIMEOUT_S)
            time.sleep(0.1)

    def forgotten() -> None:
        """Keeps one transaction open for a while (the oldest-open-transaction panel), then commits."""
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "render-slow", "linger.ms": 1})
        producer.init_transactions(TIMEOUT_S)
        while not stop.is_set():
            producer.begin_transaction()
            producer.produce("invoices", b"slow")
            producer.flush(TIMEOUT_S)
            stop.wait(15)
            producer.commit_transaction(TIMEOUT_S)

    def billing() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.subscribe(["orders"])
        try:
            while not stop.is_set():
                messages = consumer.consume(100, 1.0)
                if messages:
                    consumer.commit(asynchronous=False)
                time.sleep(0.2)  # slower than the orders come in: the group lags
        finally:
            consumer.close()

    threads = [guarded(run) for run in (orders, invoices, forgotten, billing)]
    for thread in threads:
        thread.start()
    return threads


def legend(template: str, labels: Labels) -> str:
    values = dict(labels)
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: values.get(m.group(1), ""), template) or "value"


MAX_SERIES = 8


def draw(scrapes: list[Scrape], out: Path, title: str, window_s: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = json.loads(DASHBOARD.read_text())["panels"]
    rows = max(p["gridPos"]["y"] // 8 for p in panels) + 1
    figure, axes = plt.subplots(rows, 2, figsize=(16, 3.2 * rows), squeeze=False)
    figure.suptitle(title, fontsize=14)
    for panel in panels:
        ax = axes[panel["gridPos"]["y"] // 8][panel["gridPos"]["x"] // 12]
        ax.set_title(panel["title"], fontsize=10)
        lines: list[tuple[float, str, list[float], list[float]]] = []
        for target in panel["targets"]:
            series: dict[Labels, tuple[list[float], list[float]]] = {}
            expr = cap_windows(target["expr"], window_s)
            for index, current in enumerate(scrapes):
                for labels, value in evaluate(expr, scrapes, index).items():
                    if not math.isnan(value):
                        xs, ys = series.setdefault(labels, ([], []))
                        xs.append(current.at)
                        ys.append(value)
            for labels, (xs, ys) in series.items():
                lines.append((max(ys), legend(target.get("legendFormat", ""), labels), xs, ys))
        shown = sorted(lines, key=lambda line: -line[0])[:MAX_SERIES]
        for _, label, xs, ys in shown:
            ax.plot(xs, ys, label=label, linewidth=1.2)
        if panel.get("fieldConfig", {}).get("defaults", {}).get("unit") == "s":
            ax.set_ylabel("seconds", fontsize=8)
            low = min((min(ys) for _, _, _, ys in shown), default=0.0)
            high = max((max(ys) for _, _, _, ys in shown), default=0.0)
            if low > 0 and high > 10 * low:  # spans decades: log; a flat or zero series stays linear
                ax.set_yscale("log")
        ax.set_xlabel("seconds", fontsize=8)
        ax.tick_params(labelsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
    figure.tight_layout(rect=(0, 0, 1, 0.98))
    figure.savefig(out, dpi=80)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the workload runs")
    parser.add_argument("--out", type=Path, default=DASHBOARD.with_name("dashboard.png"))
    parser.add_argument("--window", type=float, default=10.0, help="the longest rate window, in seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kproto-render-") as tmp:
        process, bootstrap, url = start_broker(str(Path(tmp) / "data"), Path(tmp) / "broker.log")
        stop, errors = threading.Event(), []  # type: ignore[var-annotated]
        try:
            threads = workload(bootstrap, stop, errors)
            started = time.monotonic()
            scrapes = []
            while (elapsed := time.monotonic() - started) < args.seconds:
                scrapes.append(scrape(url, elapsed))
                time.sleep(1.0)
            stop.set()
            for thread in threads:
                thread.join(TIMEOUT_S)
        finally:
            process.terminate()
            process.wait(TIMEOUT_S)
    for error in errors:
        print(f"client error: {error}", file=sys.stderr)
    draw(scrapes, args.out, f"rivven_kproto dashboard, rendered from a {args.seconds:.0f} s run "
         f"({time.strftime('%Y-%m-%d')}; rate windows {args.window:.0f} s)", args.window)
    print(f"wrote {args.out} from {len(scrapes)} scrapes")


if __name__ == "__main__":
    main()
