"""The fault proxy of the compatibility tests, against a fake broker: each fault does what it says."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from compat_tests import raw_client
from compat_tests.fault_proxy import (
    CUT_REQUEST,
    CUT_RESPONSE,
    DELAY_RESPONSE,
    DROP_RESPONSE,
    FaultProxy,
    FaultSchedule,
    produce_expects_response,
)
from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.produce import ProduceRequest


def frame_of(request, version: int, correlation_id: int) -> bytes:  # noqa: ANN001 - any codec message
    header = RequestHeader(
        request_api_key=request.API_KEY,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="t",
    )
    return encode_request(header, request)


def produce(acks: int = -1, transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[])


# -- the schedule and the parser ------------------------------------------------------------------


def test_schedule_is_deterministic_and_bounded() -> None:
    def draws(seed: int) -> list[str | None]:
        schedule = FaultSchedule(
            seed=seed, probability=0.5, budget={DROP_RESPONSE: 3, CUT_REQUEST: 2}, skip_first=4
        )
        return [schedule.decide() for _ in range(200)]

    first = draws(7)
    assert first == draws(7)
    assert first[:4] == [None] * 4
    assert first.count(DROP_RESPONSE) == 3 and first.count(CUT_REQUEST) == 2
    assert len([d for d in first if d]) == 5


def test_refund_returns_a_fault_to_the_budget() -> None:
    schedule = FaultSchedule(probability=1.0, budget={DROP_RESPONSE: 1})
    assert schedule.decide() == DROP_RESPONSE and schedule.exhausted
    schedule.refund(DROP_RESPONSE)
    assert schedule.decide() == DROP_RESPONSE


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        FaultSchedule(budget={"explode": 1})


@pytest.mark.parametrize("version", [3, 7, 8, 9, 11])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "tx-ü"])
def test_acks_parsed_by_hand_matches_the_codec(version: int, acks: int, transactional_id: str | None) -> None:
    frame = frame_of(produce(acks, transactional_id), version, 5)
    assert produce_expects_response(frame[4:]) == (acks != 0)


# -- a live proxy in front of a fake broker -------------------------------------------------------


class FakeBroker:
    """Answers every request frame with a response frame holding its correlation id and a marker."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[bytes] = []  # raw bytes per connection, as they ended
        self.wrong_correlation = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        seen = bytearray()
        pending = bytearray()
        try:
            while data := conn.recv(65536):
                seen += data
                pending += data
                while len(pending) >= 4 and len(pending) >= 4 + struct.unpack_from(">i", pending)[0]:
                    size = struct.unpack_from(">i", pending)[0]
                    frame = bytes(pending[4 : 4 + size])
                    del pending[: 4 + size]
                    api_key, _, correlation_id = struct.unpack_from(">hhi", frame)
                    if api_key == 0 and not produce_expects_response(frame):
                        continue
                    if self.wrong_correlation:
                        correlation_id += 1
                    body = struct.pack(">i", correlation_id) + b"answer-%d" % correlation_id
                    conn.sendall(struct.pack(">i", len(body)) + body)
        except OSError:
            pass
        finally:
            self.received.append(bytes(seen))
            conn.close()

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    broker = FakeBroker()
    yield broker
    broker.close()


def proxy_for(fake: FakeBroker, schedule: FaultSchedule) -> FaultProxy:
    return FaultProxy(schedule, upstream_port=fake.port).start()


def answer(sock: socket.socket) -> bytes:
    return raw_client.read_frame(sock)


def test_clean_traffic_passes_and_acks_zero_gets_no_response(fake: FakeBroker) -> None:
    with proxy_for(fake, FaultSchedule()) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        sock.sendall(
            frame_of(ApiVersionsRequest(), 0, 1) + frame_of(produce(0), 9, 2) + frame_of(produce(1), 9, 3)
        )
        assert answer(sock) == struct.pack(">i", 1) + b"answer-1"
        assert answer(sock) == struct.pack(">i", 3) + b"answer-3"
        sock.close()
        assert proxy.stats()["produce_requests"] == 2


def test_drop_response_reaches_the_broker_then_closes(fake: FakeBroker) -> None:
    with proxy_for(fake, FaultSchedule(probability=1.0, budget={DROP_RESPONSE: 1})) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        request = frame_of(produce(), 9, 7)
        sock.sendall(frame_of(ApiVersionsRequest(), 0, 6) + request)
        assert answer(sock).startswith(struct.pack(">i", 6))  # non-Produce is never touched
        assert raw_client.closed_by_peer(sock, 5)
        assert proxy.injected[DROP_RESPONSE] == 1
        # The budget is spent: the next connection is left alone.
        sock = raw_client.connect(proxy.bootstrap)
        sock.sendall(frame_of(produce(), 9, 8))
        assert answer(sock).startswith(struct.pack(">i", 8))
    assert any(request in seen for seen in fake.received)


def test_cut_request_forwards_half_a_frame(fake: FakeBroker) -> None:
    with proxy_for(fake, FaultSchedule(probability=1.0, budget={CUT_REQUEST: 1})) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        request = frame_of(produce(transactional_id="x" * 100), 9, 9)
        sock.sendall(request)
        assert raw_client.closed_by_peer(sock, 5)
        assert proxy.injected[CUT_REQUEST] == 1
    deadline = time.monotonic() + 5
    while not fake.received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.received == [request[: 4 + (len(request) - 4) // 2]]


def test_cut_response_delivers_half_then_closes(fake: FakeBroker) -> None:
    with proxy_for(fake, FaultSchedule(probability=1.0, budget={CUT_RESPONSE: 1})) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        sock.sendall(frame_of(produce(), 9, 10))
        sock.settimeout(5)
        data = b""
        while chunk := sock.recv(100):
            data += chunk
        assert 0 < len(data) < 4 + 4 + len(b"answer-10")
        assert proxy.injected[CUT_RESPONSE] == 1


def test_delay_holds_this_and_later_responses(fake: FakeBroker) -> None:
    schedule = FaultSchedule(probability=1.0, budget={DELAY_RESPONSE: 1}, delay_s=0.5)
    with proxy_for(fake, schedule) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        started = time.monotonic()
        sock.sendall(frame_of(produce(), 9, 11) + frame_of(ApiVersionsRequest(), 0, 12))
        assert answer(sock).startswith(struct.pack(">i", 11))
        assert answer(sock).startswith(struct.pack(">i", 12))
        assert time.monotonic() - started >= 0.5
        assert proxy.injected[DELAY_RESPONSE] == 1


def test_client_giving_up_during_a_delay_is_counted(fake: FakeBroker) -> None:
    schedule = FaultSchedule(probability=1.0, budget={DELAY_RESPONSE: 1}, delay_s=30)
    with proxy_for(fake, schedule) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        sock.sendall(frame_of(produce(), 9, 13))
        deadline = time.monotonic() + 5
        while proxy.injected[DELAY_RESPONSE] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        sock.close()
        while proxy.stats().get("delay_abandoned", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.stats()["delay_abandoned"] == 1
    # close() returned promptly although a 30 s sleep was pending: everything was cancelled.


def test_pending_faults_of_a_dead_connection_are_refunded(fake: FakeBroker) -> None:
    schedule = FaultSchedule(probability=1.0, budget={DROP_RESPONSE: 2})
    with proxy_for(fake, schedule) as proxy:
        sock = raw_client.connect(proxy.bootstrap)
        sock.sendall(frame_of(produce(), 9, 1) + frame_of(produce(), 9, 2))
        assert raw_client.closed_by_peer(sock, 5)
        deadline = time.monotonic() + 5
        while proxy.stats().get("refunded", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.injected[DROP_RESPONSE] == 1 and proxy.stats()["refunded"] == 1
        assert not schedule.exhausted


def test_a_response_out_of_order_crashes_the_proxy_loudly(fake: FakeBroker) -> None:
    fake.wrong_correlation = True
    proxy = proxy_for(fake, FaultSchedule())
    sock = raw_client.connect(proxy.bootstrap)
    sock.sendall(frame_of(ApiVersionsRequest(), 0, 1))
    assert raw_client.closed_by_peer(sock, 5)
    with pytest.raises(RuntimeError, match="crashed"):
        proxy.close()


def test_broker_down_closes_the_client() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        with FaultProxy(upstream_port=port) as proxy:
            sock = raw_client.connect(proxy.bootstrap)
            assert raw_client.closed_by_peer(sock, 5)
            assert proxy.stats()["upstream_refused"] == 1
