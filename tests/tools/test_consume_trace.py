"""tools.bench.consume_trace's reading of librdkafka's fetch debug lines (as librdkafka 2.16 words
them): responses with their size and round trip, partitions parked on a full queue, and whether a
park came before the last response (the slow consume mode)."""

from __future__ import annotations

import logging

from tools.bench.consume_trace import Trace

PREFIX = "[rdkafka#consumer-3] [thrd:127.0.0.1:38409/0]: 127.0.0.1:38409/0: "
RESPONSE = PREFIX + "Received FetchResponse (v12, {size} bytes, CorrId 2, rtt 21.07ms)"
NOT_FETCHABLE = (PREFIX + "Topic bench-8p [{p}] in state active at offset 0 (leader epoch -1) "
                 "({queued}/100000 msgs, 10742/65536 kb queued, opv 2) is not fetchable: queued.min.messages exceeded")
PARKED = PREFIX + "bench-8p [{p}]: Fetch backoff for 1000ms: Local: Queue full"


def feed(trace: Trace, *lines: str) -> None:
    for line in lines:
        trace.emit(logging.LogRecord("rdkafka", logging.DEBUG, __file__, 0, line, None, None))


def test_responses_and_parks_are_counted() -> None:
    trace = Trace()
    feed(trace, RESPONSE.format(size=8_000_000), RESPONSE.format(size=8_100_000),
         NOT_FETCHABLE.format(p=0, queued=110_010), PARKED.format(p=0),
         NOT_FETCHABLE.format(p=1, queued=110_012), PARKED.format(p=1))
    assert trace.responses == [8_000_000, 8_100_000]
    assert trace.rtts_ms == [21.07, 21.07]
    assert trace.queue_full == 2
    assert trace.parked_at == [16_100_000]  # one park, of both partitions
    assert trace.queued == 110_012


def test_a_park_before_the_last_response_is_the_slow_mode() -> None:
    early = Trace()
    feed(early, RESPONSE.format(size=8_000_000), PARKED.format(p=0), RESPONSE.format(size=6_000_000))
    assert early.parked_early()
    late = Trace()
    feed(late, RESPONSE.format(size=8_000_000), RESPONSE.format(size=6_000_000), PARKED.format(p=0))
    assert not late.parked_early()
    assert not Trace().parked_early()
