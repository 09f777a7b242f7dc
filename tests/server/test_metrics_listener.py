"""The metrics listener's connection cap and idle timeout (issue #37 item 6), on real sockets."""

from __future__ import annotations

import logging

import pytest
import trio

from rivven_kproto.server.http import serve_metrics
from rivven_kproto.server.metrics import BrokerMetrics

HEALTHZ = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"
ATTEMPTS = 500


async def read_to_end(stream: trio.SocketStream) -> bytes:
    answer = b""
    try:
        while chunk := await stream.receive_some(4096):
            answer += chunk
    except trio.BrokenResourceError:  # a reset instead of a FIN: closed all the same
        pass
    return answer


async def start(nursery: trio.Nursery, max_connections: int, idle_s: float) -> int:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(lambda: serve_metrics(listeners, BrokerMetrics(), max_connections=max_connections,
                                             idle_s=idle_s))
    return int(listeners[0].socket.getsockname()[1])


async def test_connections_beyond_the_cap_are_closed_at_once_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rivven_kproto.server.http")
    async with trio.open_nursery() as nursery:
        port = await start(nursery, max_connections=3, idle_s=3600)
        held = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(3)]
        for _ in range(4):
            extra = await trio.open_tcp_stream("127.0.0.1", port)
            assert await read_to_end(extra) == b""  # closed without an answer
            await extra.aclose()
        # The held (idle) connections are still served.
        await held[0].send_all(HEALTHZ)
        assert (await read_to_end(held[0])).startswith(b"HTTP/1.1 200")
        # Its slot is free once the listener has seen the close: a new connection is served.
        for _ in range(ATTEMPTS):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(HEALTHZ)
            answer = await read_to_end(stream)
            await stream.aclose()
            if answer:
                break
            await trio.sleep(0.01)
        assert answer.startswith(b"HTTP/1.1 200")
        for stream in held:
            await stream.aclose()
        nursery.cancel_scope.cancel()
    refusals = [r.getMessage() for r in caplog.records if "refusing a metrics connection" in r.getMessage()]
    assert len(refusals) == 1 and "kproto.metrics.max.connections=3 reached" in refusals[0]


async def test_an_idle_connection_is_closed_after_the_idle_timeout(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        port = await start(nursery, max_connections=2, idle_s=30)
        opened = trio.current_time()
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        assert await read_to_end(stream) == b""
        assert trio.current_time() - opened >= 30
        await stream.aclose()
        nursery.cancel_scope.cancel()


def test_the_metrics_cap_is_kept_out_of_the_kafka_listeners_default() -> None:
    """The descriptor budget: the log's reserve, then the metrics listener's cap, then Kafka clients."""
    from rivven_kproto.server.connection_limits import default_max_connections

    assert default_max_connections(1024) == 768
    assert default_max_connections(1024, 16) == 752
    assert default_max_connections(70, 16) == 1  # never none at all
