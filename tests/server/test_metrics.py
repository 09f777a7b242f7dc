"""The metrics endpoint's pure parts: routing, the error-code walk, and a scrape of a real Broker."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from rivven_kproto.server.http import route
from rivven_kproto.server.metrics import CONTENT_TYPE, BrokerMetrics, error_codes

NOW = 1_700_000_000_000


def partition(index: int, error: Errors) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=error, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)


def test_error_codes_are_found_at_every_depth() -> None:
    response = ProduceResponse(
        responses=[
            TopicProduceResponse(name="a", partition_responses=[partition(0, Errors.NONE), partition(1, Errors.NOT_LEADER_OR_FOLLOWER)]),
            TopicProduceResponse(name="b", partition_responses=[partition(0, Errors.TOPIC_AUTHORIZATION_FAILED)]),
        ],
        throttle_time_ms=0,
    )
    assert sorted(error_codes(response)) == sorted([Errors.NOT_LEADER_OR_FOLLOWER, Errors.TOPIC_AUTHORIZATION_FAILED])
    metrics = BrokerMetrics()
    metrics.observe_request(0, 0.002, response)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}
    assert samples[("rivven_requests_total", (("api", "Produce"),))] == 1
    assert samples[("rivven_request_errors_total", (("api", "Produce"), ("error", "TOPIC_AUTHORIZATION_FAILED")))] == 1


def test_routes_and_readiness(tmp_path: Path) -> None:
    metrics = BrokerMetrics()
    assert route(metrics, "GET", "/readyz")[0] == 503
    assert route(metrics, "GET", "/healthz") == (200, "text/plain", b"ok\n")
    assert route(metrics, "POST", "/metrics")[0] == 405
    assert route(metrics, "GET", "/other")[0] == 404
    status, content_type, body = route(metrics, "GET", "/metrics?x=1")
    assert (status, content_type) == (200, CONTENT_TYPE) and b"rivven_transactions_started_total" not in body
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data"), NOW)
    try:
        metrics.broker, metrics.ready = broker, True
        assert route(metrics, "GET", "/readyz")[0] == 200
        body = route(metrics, "GET", "/metrics")[2].decode()
        for name in ("rivven_transactions_started_total", "rivven_transactions_committed_total",
                     "rivven_transactions_aborted_total", "rivven_transactions_timed_out_total",
                     "rivven_transactions_active", "rivven_idempotent_producers_active",
                     "rivven_idempotent_duplicates_total"):
            assert f"\n{name} 0.0" in body, name
    finally:
        broker.close()


def test_scrapes_reuse_a_recent_rendering_and_format_it_in_slices(tmp_path: Path) -> None:
    """A scrape within ``max_age_ms`` of a rendering gets that rendering; 0 renders every time; the
    sliced rendering is the same text as a rendering in one go."""
    import trio

    from rivven_kproto.server import metrics as metrics_module

    async def scrape_twice(max_age_ms: int) -> tuple[bytes, bytes]:
        metrics = BrokerMetrics(max_age_ms=max_age_ms)
        first = await metrics.scrape()
        metrics.observe_request(0, 0.002, None)
        return first, await metrics.scrape()

    first, second = trio.run(scrape_twice, 3_600_000)
    assert first == second and b'rivven_requests_total{api="Produce"}' not in second
    first, second = trio.run(scrape_twice, 0)
    assert b'rivven_requests_total{api="Produce"} 1.0' in second

    broker = Broker(BrokerConfig(data_dir=tmp_path / "data"), NOW)
    try:
        broker.create_topic("sliced", 300, 1, {}, NOW)  # 1,500 per-partition samples
        metrics = BrokerMetrics(max_age_ms=0)
        metrics.broker = broker
        for api in range(40):
            metrics.observe_request(api, 0.01, None)
        sliced = trio.run(metrics._render)[1]
        assert len(list(metrics_module._slices(list(metrics.registry.collect())))) > 1
        assert sliced == metrics.exposition()
    finally:
        broker.close()


def test_the_endpoint_survives_bad_clients() -> None:
    """Garbage, an unfinished request and a non-UTF-8 target close only that connection."""
    import trio

    from rivven_kproto.server.http import serve_metrics

    async def main() -> None:
        metrics = BrokerMetrics()
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_metrics, listeners, metrics)
            for junk in (b"\x00\xff garbage\r\n\r\n", b"GET /\xff\xfe HTTP/1.1\r\nhost: x\r\n\r\n", b"GET /metr"):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(junk)
                await stream.aclose()
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            answer = b""
            while chunk := await stream.receive_some(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok\n")
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_client_accepting_gzip_gets_the_same_rendering_gzipped() -> None:
    """As Prometheus asks (Accept-Encoding: gzip): the one rendering, compressed, in one answer."""
    import gzip

    import trio

    from rivven_kproto.server import metrics as metrics_module
    from rivven_kproto.server.http import serve_metrics

    async def get(port: int, accept: bytes) -> tuple[bytes, bytes]:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n" + accept + b"\r\n")
        answer = b""
        while chunk := await stream.receive_some(1 << 16):
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        return head.lower(), body

    async def main() -> None:
        metrics = BrokerMetrics(max_age_ms=3_600_000)
        for api in range(20):
            metrics.observe_request(api, 0.001, None, 0)
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_metrics, listeners, metrics)
            plain_head, plain = await get(port, b"")
            gzip_head, packed = await get(port, b"accept-encoding: gzip, deflate\r\n")
            assert b"content-encoding" not in plain_head and b"content-encoding: gzip" in gzip_head
            assert f"content-length: {len(packed)}".encode() in gzip_head
            assert gzip.decompress(packed) == plain and len(packed) < len(plain) / 4
            assert b'rivven_requests_total{api="Produce"} 1.0' in plain
            large = bytes(range(256)) * 2048  # more than one slice, and barely compressible
            assert gzip.decompress(await metrics_module._gzip(large)) == large
            nursery.cancel_scope.cancel()

    trio.run(main)
