"""BrokerConnection over in-memory streams against a scripted broker, and KafkaClient over TCP."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
import trio
import trio.testing

from rivven_kproto.client import BrokerUnreachableError, ConnectionLostError, KafkaClient, RequestTimeoutError
from rivven_kproto.codec.connection import (
    RequestEvent,
    ServerConnection,
    encode_response,
    encode_unsupported_api_versions,
)
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsResponse
from rivven_kproto.codec.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
)
from rivven_kproto.net.connection import BrokerConnection

SUPPORTED = [
    ApiVersion(api_key=3, min_version=0, max_version=12),
    ApiVersion(api_key=18, min_version=0, max_version=3),
]

Answer = Callable[[RequestEvent], bytes | None]


def old_broker(event: RequestEvent) -> bytes | None:
    """Knows ApiVersions only up to v3 and answers Metadata with a broker id from the request's topics."""
    header = event.header
    if header.request_api_key == 18:
        if header.request_api_version > 3:
            return encode_unsupported_api_versions(header.correlation_id, SUPPORTED)
        return encode_response(header, ApiVersionsResponse(error_code=0, api_keys=SUPPORTED))
    request = event.request
    assert isinstance(request, MetadataRequest)
    node = len(request.topics or [])
    return encode_response(header, MetadataResponse(brokers=[MetadataResponseBroker(node_id=node, host="h", port=1)], topics=[]))


async def serve_script(stream: trio.abc.Stream, answer: Answer, hold: trio.Event | None = None) -> None:
    """Answer requests as ``answer`` says (None: never); with ``hold``, the first Metadata waits for it."""
    connection = ServerConnection()
    while True:
        data = await stream.receive_some()
        if not data:
            return
        connection.receive_data(data)
        while (event := connection.next_event()) is not None:
            if hold is not None and event.header.request_api_key == 3:
                await hold.wait()
                hold = None
            reply = answer(event)
            if reply is not None:
                await stream.send_all(reply)


async def test_negotiation_falls_back_and_pipelined_requests_match() -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    release = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_script, server_stream, old_broker, release)
        connection = BrokerConnection(client_stream, "memory", node_id=0, client_id="test")
        await connection._negotiate()
        assert connection.versions.version_for(MetadataRequest) == 12
        assert connection.versions.apis[18].negotiated == 3
        results: dict[int, int] = {}

        async def ask(count: int) -> None:
            topics = [] if count == 0 else [_topic(f"t{i}") for i in range(count)]
            response = await connection.request(MetadataRequest(topics=topics), None, MetadataResponse)
            results[count] = response.brokers[0].node_id

        async with trio.open_nursery() as askers:
            for count in range(4):
                askers.start_soon(ask, count)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert results == {0: 0, 1: 1, 2: 2, 3: 3}
        await connection.aclose()
        nursery.cancel_scope.cancel()


def _topic(name: str) -> MetadataRequestTopic:
    return MetadataRequestTopic(name=name)


async def test_timed_out_request_leaves_the_connection_usable(autojump_clock: trio.testing.MockClock) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    answered = 0

    def slow_first(event: RequestEvent) -> bytes | None:
        nonlocal answered
        if event.header.request_api_key == 3:
            answered += 1
            if answered == 1:
                return None  # never answered
        return old_broker(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_script, server_stream, slow_first)
        connection = BrokerConnection(client_stream, "memory", node_id=0, client_id=None)
        await connection._negotiate()
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(5):
                await connection.request(MetadataRequest(topics=[]), None, MetadataResponse)
        response = await connection.request(MetadataRequest(topics=[_topic("a")]), None, MetadataResponse)
        assert response.brokers[0].node_id == 1
        nursery.cancel_scope.cancel()


async def test_peer_closing_fails_pending_requests() -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()

    async def close_on_metadata(stream: trio.abc.Stream) -> None:
        connection = ServerConnection()
        while True:
            connection.receive_data(await stream.receive_some())
            event = connection.next_event()
            if event is None:
                continue
            if event.header.request_api_key == 3:
                await stream.aclose()
                return
            await stream.send_all(old_broker(event) or b"")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_on_metadata, server_stream)
        connection = BrokerConnection(client_stream, "memory", node_id=0, client_id=None)
        await connection._negotiate()
        with pytest.raises(ConnectionLostError, match="closed the connection"):
            await connection.request(MetadataRequest(topics=[]), None, MetadataResponse)
        assert not connection.usable
        with pytest.raises(ConnectionLostError):
            await connection.request(MetadataRequest(topics=[]), None, MetadataResponse)


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_unreachable_bootstrap_is_one_typed_error() -> None:
    port = _unused_port()
    async with KafkaClient(f"127.0.0.1:{port}", timeout=5) as client:
        with pytest.raises(BrokerUnreachableError) as info:
            await client.metadata(None)
    assert info.value.name == "NETWORK_EXCEPTION"
    assert f"127.0.0.1:{port}" in info.value.message and "refused" in info.value.message


async def test_silent_broker_times_out() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        async with KafkaClient(f"127.0.0.1:{port}", timeout=0.3) as client:
            with pytest.raises(RequestTimeoutError, match="within 0.3s") as info:
                await client.metadata(None)
    assert info.value.name == "REQUEST_TIMED_OUT"
