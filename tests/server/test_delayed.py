"""Delayed responses: Pending objects parked by key, woken by notify, expired at the deadline.

The unit tests run on trio's autojump clock (virtual time, no sleeping). The last test runs a real
``serve()`` on a socket and pipelines requests behind a parked JoinGroup on one connection: the
answers come back in request order.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import trio

from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.groups import GroupConfig
from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest
from rivven_kproto.codec.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from rivven_kproto.codec.schema import REQUESTS, RESPONSES
from rivven_kproto.server.app import serve
from rivven_kproto.server.delayed import DelayedResponses, Pending


def trio_ms() -> int:
    return int(trio.current_time() * 1000)


class Box:
    """A pending whose answer is set from outside; records how it ended."""

    def __init__(self, deadline_ms: int, key: str = "k") -> None:
        self.value: str | None = None
        self.expired_at: int | None = None
        self.pending = Pending(key, deadline_ms, lambda now: self.value, self._expire)

    def _expire(self, now: int) -> str:
        self.expired_at = now
        return "expired"


async def test_wakes_on_notify_of_its_key(autojump_clock: trio.abc.Clock) -> None:
    delayed = DelayedResponses(trio_ms)
    box = Box(trio_ms() + 60_000)
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _collect(delayed, box.pending, results))
        await trio.sleep(1)
        assert delayed.parked == 1 and results == []
        box.value = "ready"
        delayed.notify(["other"])  # not its key: stays parked
        await trio.sleep(1)
        assert results == []
        delayed.notify(["k"])
    assert results == [("ready", 2000)]
    assert box.expired_at is None and delayed.parked == 0


async def test_expires_at_the_deadline(autojump_clock: trio.abc.Clock) -> None:
    delayed = DelayedResponses(trio_ms)
    start = trio_ms()
    box = Box(start + 5_000)
    results: list[Any] = []
    await _collect(delayed, box.pending, results)
    assert results == [("expired", start + 5_000)]
    assert box.expired_at == start + 5_000


async def test_already_complete_answers_without_waiting(autojump_clock: trio.abc.Clock) -> None:
    delayed = DelayedResponses(trio_ms)
    box = Box(trio_ms() + 5_000)
    box.value = "now"
    assert await delayed.wait(box.pending) == "now"


async def test_close_expires_everything_parked(autojump_clock: trio.abc.Clock) -> None:
    delayed = DelayedResponses(trio_ms)
    boxes = [Box(trio_ms() + 60_000, key) for key in ("a", "b")]
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        for box in boxes:
            nursery.start_soon(lambda b=box: _collect(delayed, b.pending, results))
        await trio.sleep(1)
        delayed.close()
    assert [r for r, _ in results] == ["expired", "expired"]


async def test_abandoned_wait_releases_through_expire(autojump_clock: trio.abc.Clock) -> None:
    delayed = DelayedResponses(trio_ms)
    box = Box(trio_ms() + 60_000)
    with trio.move_on_after(2):
        await delayed.wait(box.pending)
    assert box.expired_at is not None and delayed.parked == 0


async def _collect(delayed: DelayedResponses, pending: Pending, out: list[Any]) -> None:
    out.append((await delayed.wait(pending), trio_ms()))


# -- a real server: order on one connection --------------------------------------------------------


def frame(request: Any, version: int, correlation_id: int) -> bytes:
    header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                           correlation_id=correlation_id, client_id="delayed-test")
    return encode_request(header, request)


async def read_response(stream: trio.SocketStream, buffer: bytearray, api_key: int, version: int) -> tuple[int, Any]:
    while len(buffer) < 4 or len(buffer) < 4 + struct.unpack(">i", buffer[:4])[0]:
        chunk = await stream.receive_some(65536)
        assert chunk, "connection closed"
        buffer += chunk
    size = struct.unpack(">i", buffer[:4])[0]
    body = bytes(buffer[4 : 4 + size])
    del buffer[: 4 + size]
    reader = io.BytesIO(body)
    header = ResponseHeader.decode_from(reader, response_header_version(REQUESTS[api_key], version))
    return header.correlation_id, RESPONSES[api_key].decode(body[reader.tell():], version)


async def test_pipelined_requests_behind_a_parked_join_are_answered_in_order(tmp_path: Path) -> None:
    config = BrokerConfig(listen_port=0, data_dir=tmp_path / "data",
                          groups=GroupConfig(initial_rebalance_delay_ms=300))
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve, config)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            join = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                    member_id="", protocol_type="consumer",
                                    protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")])
            heartbeat = HeartbeatRequest(group_id="g", generation_id=0, member_id="nobody")
            started = trio.current_time()
            await stream.send_all(
                frame(join, 3, 1) + frame(ApiVersionsRequest(), 0, 2) + frame(heartbeat, 2, 3)
            )
            buffer = bytearray()
            first = await read_response(stream, buffer, JoinGroupRequest.API_KEY, 3)
            waited = trio.current_time() - started
            second = await read_response(stream, buffer, ApiVersionsRequest.API_KEY, 0)
            third = await read_response(stream, buffer, HeartbeatRequest.API_KEY, 2)
            assert [first[0], second[0], third[0]] == [1, 2, 3]
            assert first[1].error_code == 0 and first[1].generation_id == 1
            assert first[1].leader == first[1].member_id and first[1].member_id.startswith("delayed-test-")
            assert waited >= 0.29  # parked for the initial rebalance delay
            assert second[1].error_code == 0
            assert third[1].error_code == 25  # UNKNOWN_MEMBER_ID
            await stream.aclose()
            nursery.cancel_scope.cancel()
