"""python -m tools.bench.consume_trace: why a confluent-kafka consume runs in its slow or fast mode.

librdkafka parks every partition for ``fetch.queue.backoff.ms`` (1000 ms by default) when, after
a Fetch response, its consumer queue holds ``queued.min.messages`` (100,000) or more messages the
application has not taken yet. A consume of 200k records then costs one extra second (the ~175k
msg/s mode); one that finishes before the queue is found that full runs at the client's speed.
This produces the consume workload's topic on each broker, reads it ``--reads`` times with
librdkafka's ``fetch`` and ``protocol`` debug on, and prints per read: the rate, the Fetch
responses (count, bytes, record count of the largest), and how many times the client parked
its partitions on a full queue (one count per partition). The log lines are counted, not kept.

    python -m tools.bench.consume_trace --peer tansu --messages 200000 --reads 5
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass, field

from . import brokers
from . import workloads as w
from .runner import CONSUMED_PARTITIONS, CONSUMED_TOPIC

RESPONSE = re.compile(r"Received FetchResponse \(v\d+, (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms")
QUEUE_FULL = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")
NOT_FETCHABLE = re.compile(r"\((\d+)/(\d+) msgs, .* not fetchable: queued\.min\.messages exceeded")


@dataclass
class Trace(logging.Handler):
    """Counts the client's Fetch responses and queue-full backoffs from its debug log."""

    responses: list[int] = field(default_factory=list)
    rtts_ms: list[float] = field(default_factory=list)
    queue_full: int = 0
    parked_at: list[int] = field(default_factory=list)  # bytes received when each park began
    queued: int = 0  # the most messages the client held when it parked a partition

    def __post_init__(self) -> None:
        logging.Handler.__init__(self)

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if found := RESPONSE.search(text):
            self.responses.append(int(found.group(1)))
            self.rtts_ms.append(float(found.group(2)))
        elif found := NOT_FETCHABLE.search(text):
            self.queued = max(self.queued, int(found.group(1)))
        elif QUEUE_FULL.search(text):
            self.queue_full += 1  # one line per partition parked
            if not self.parked_at or self.parked_at[-1] != sum(self.responses):
                self.parked_at.append(sum(self.responses))

    def parked_early(self) -> bool:
        """Whether the client parked its partitions before the last response arrived: the read then
        waited ``fetch.queue.backoff.ms`` for data it had not fetched yet (the slow mode)."""
        return any(at < sum(self.responses) for at in self.parked_at)

    __hash__ = logging.Handler.__hash__


def traced_read(bootstrap: str, count: int, isolation: str) -> tuple[float, Trace]:
    trace = Trace()
    logger = logging.getLogger(f"{__name__}.rdkafka")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(trace)
    try:
        figures = w.consume(bootstrap, CONSUMED_TOPIC, count, CONSUMED_PARTITIONS, isolation,
                            client={"debug": "fetch,protocol", "logger": logger})  # type: ignore[dict-item]
    finally:
        logger.removeHandler(trace)
    return figures.msgs_per_s, trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.consume_trace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", action="append", default=[], help="also this broker (tansu, postgresql, or a command)")
    parser.add_argument("--no-limit", action="store_true", help="skip the null broker")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--isolation", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    targets = [brokers.ours(), *(brokers.peer(spec) for spec in args.peer)]
    if not args.no_limit:
        targets.append(brokers.null_broker())
    for target in targets:
        running = brokers.Running(target, 0)
        try:
            w.produce(running.bootstrap, CONSUMED_TOPIC, args.messages, CONSUMED_PARTITIONS)
            for read in range(args.reads):
                rate, trace = traced_read(running.bootstrap, args.messages + CONSUMED_PARTITIONS, args.isolation)
                sizes = trace.responses
                print(f"{target.name} read {read}: {rate:>10,.0f} msg/s, {len(sizes):>3} Fetch responses "
                      f"({sum(sizes) / 1e6:.1f} MB, sizes {' '.join(f'{b / 1e6:.2f}' for b in sizes)} MB, "
                      f"rtt {' '.join(f'{ms:.0f}' for ms in trace.rtts_ms)} ms), "
                      f"partitions parked on a full queue: {trace.queue_full}"
                      f" (after {', '.join(f'{b / 1e6:.1f}' for b in trace.parked_at) or '-'} MB"
                      f" of {sum(sizes) / 1e6:.1f}, {trace.queued} messages queued)"
                      f"{' -> waited for data not yet fetched' if trace.parked_early() else ''}", flush=True)
        finally:
            running.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
