"""A fault-injecting Kafka proxy: forwards frames between clients and the broker, and breaks Produce.

The proxy frames both directions (4-byte big-endian size prefix). Requests are remembered in order
per connection and each response is matched to the oldest request still waiting for one (Kafka
answers in order on a connection; a Produce with ``acks=0`` gets no response). The correlation id
of every response is checked against its request, so a broker answering out of order is caught.

Only Produce requests (api key 0) are ever broken, so bootstrap, metadata and fetches keep working.
For each Produce request the :class:`FaultSchedule` draws from its own seeded ``random.Random``:
with ``probability`` one fault, of a kind that still has budget, is chosen:

``drop_response``  the request reaches the broker; its response is thrown away and both
                   connections are closed, so the client must retry something the broker wrote.
``cut_request``    only the first half of the request frame is forwarded, then both connections
                   are closed: the broker sees a torn frame, the client a dead connection.
``cut_response``   the broker answers; the client gets half of the response frame, then EOF.
``delay_response`` the response (and every later one on that connection, order is kept) is held
                   for ``delay_s``, longer than the client's request timeout; a client that gives
                   up and closes is counted in ``delay_abandoned``.

Apart from the schedule, ``withhold_produce_responses`` swallows every Produce response while it is
set (counted in ``withheld``), for a test that kills the broker with acknowledgements in flight;
``record_produce`` keeps every Produce request with the broker's response to it, so a test can see
what the broker answered to each attempt of a retried batch.

Budgets are per kind, so a run injects a bounded number of faults and always terminates. The
decisions depend only on the seed and the order of Produce requests (which, with several client
connections, may interleave differently from run to run). ``injected`` counts the faults that
actually happened; a fault whose connection died before it could happen goes back into the budget.

The proxy runs ``trio.run`` in a background thread; every task belongs to a nursery. ``close()``
cancels the root nursery from the test's thread and joins the thread, re-raising whatever
crashed the proxy. Use it as a context manager from synchronous pytest code.
"""

from __future__ import annotations

import itertools
import logging
import random
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trio

log = logging.getLogger(__name__)

PRODUCE = 0
DROP_RESPONSE = "drop_response"
CUT_REQUEST = "cut_request"
CUT_RESPONSE = "cut_response"
DELAY_RESPONSE = "delay_response"
KINDS = (DROP_RESPONSE, CUT_REQUEST, CUT_RESPONSE, DELAY_RESPONSE)

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_INT16 = struct.Struct(">h")
_MAX_FRAME = 200 * 1024 * 1024
_READ = 256 * 1024


class ProxyError(Exception):
    """The traffic broke the proxy's expectations (bad framing, a response nobody asked for)."""


@dataclass
class FaultSchedule:
    """Which faults, how many and how often; deterministic for a given ``seed``."""

    seed: int = 0
    probability: float = 0.0
    budget: dict[str, int] = field(default_factory=dict)
    delay_s: float = 3.0
    skip_first: int = 0  # Produce requests passed through untouched before any fault

    def __post_init__(self) -> None:
        unknown = set(self.budget) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")
        self._rng = random.Random(self.seed)
        self._left = dict(self.budget)
        self._seen = 0

    def decide(self) -> str | None:
        """The fault for the next Produce request, or None."""
        self._seen += 1
        if self._seen <= self.skip_first:
            return None
        draw = self._rng.random()
        kinds = [kind for kind in KINDS if self._left.get(kind, 0) > 0]
        if not kinds or draw >= self.probability:
            return None
        kind = self._rng.choice(kinds)
        self._left[kind] -= 1
        return kind

    def refund(self, kind: str) -> None:
        """A fault whose connection died before it could happen goes back into the budget."""
        self._left[kind] += 1

    @property
    def exhausted(self) -> bool:
        return not any(self._left.values())


def produce_expects_response(frame: bytes) -> bool:
    """False for a Produce request with acks=0 (no response); parsed by hand, not with our codec."""
    _, version, _ = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    (client_id_len,) = _INT16.unpack_from(frame, pos)
    pos += 2 + max(client_id_len, 0)
    if version >= 9:  # flexible: request header v2 carries tagged fields, strings are compact
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
        length, pos = _uvarint(frame, pos)  # transactional_id: compact nullable string
        pos += max(length - 1, 0)
    elif version >= 3:
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2 + max(length, 0)
    (acks,) = _INT16.unpack_from(frame, pos)
    return acks != 0


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProxyError("varint too long")


def split_frames(buffer: bytearray) -> list[bytes]:
    """Remove and return every complete frame (prefix included) at the start of ``buffer``."""
    frames, pos = [], 0
    while len(buffer) - pos >= 4:
        (size,) = _SIZE.unpack_from(buffer, pos)
        if size < 4 or size > _MAX_FRAME:
            raise ProxyError(f"frame size {size}")
        if len(buffer) - pos < 4 + size:
            break
        frames.append(bytes(buffer[pos : pos + 4 + size]))
        pos += 4 + size
    del buffer[:pos]
    return frames


@dataclass(slots=True)
class _Pending:
    api_key: int
    correlation_id: int
    fault: str | None
    frame: bytes | None = None  # kept only for Produce when the proxy records


class _Connection:
    """One client connection and its broker connection: two pumps in one nursery."""

    def __init__(self, proxy: FaultProxy, client: trio.SocketStream, upstream: trio.SocketStream) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.pending: deque[_Pending] = deque()
        self.delaying = False
        self.scope: trio.CancelScope | None = None
        self.number = next(proxy._numbers)
        proxy._count("connections")

    def close(self, reason: str) -> None:
        assert self.scope is not None
        if not self.scope.cancel_called:
            self.proxy._event(self.number, f"closed: {reason}")
        self.scope.cancel()

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self.scope = nursery.cancel_scope
                nursery.start_soon(self.client_to_broker)
                nursery.start_soon(self.broker_to_client)
        except BaseException as exc:
            # Kept here too: a Cancelled raised by a checkpoint in a ``finally`` on the way up (ours
            # or trio's) while the root is being cancelled would otherwise replace this error.
            self.proxy._record_crash(exc)
            raise
        finally:
            for request in self.pending:
                if request.fault is not None:
                    self.proxy._refund(request.fault)
            self.pending.clear()
            await trio.aclose_forcefully(self.client)
            await trio.aclose_forcefully(self.upstream)

    async def client_to_broker(self) -> None:
        buffer = bytearray()
        while True:
            data = await _receive(self.client)
            if not data:
                if self.delaying:
                    self.proxy._count("delay_abandoned")
                self.close("client EOF" + (" during a delay" if self.delaying else ""))
                return
            buffer += data
            out = bytearray()
            for frame in split_frames(buffer):
                api_key, _, correlation_id = _HEADER.unpack_from(frame, 4)
                if api_key == self.proxy.swallow_api:
                    await _send(self.upstream, out)  # what came before it, in order
                    self.proxy._count("swallowed")
                    self.close(f"swallowed api key {api_key} (correlation id {correlation_id})")
                    return
                fault = self.proxy._decide() if api_key == PRODUCE else None
                if api_key == PRODUCE:
                    self.proxy._count("produce_requests")
                if fault == CUT_REQUEST:
                    out += frame[: 4 + (len(frame) - 4) // 2]
                    await _send(self.upstream, out)
                    self.proxy._count(CUT_REQUEST)
                    self.close(f"{CUT_REQUEST} (correlation id {correlation_id})")
                    return
                if api_key != PRODUCE or produce_expects_response(frame[4:]):
                    kept = frame[4:] if api_key == PRODUCE and self.proxy.record_produce else None
                    self.pending.append(_Pending(api_key, correlation_id, fault, kept))
                out += frame
            if out and not await _send(self.upstream, out):
                self.close("broker connection broken")
                return

    async def broker_to_client(self) -> None:
        buffer = bytearray()
        while True:
            data = await _receive(self.upstream)
            if not data:
                self.close("broker EOF")
                return
            buffer += data
            out = bytearray()
            for frame in split_frames(buffer):
                if not self.pending:
                    raise ProxyError("the broker sent a response nobody asked for")
                request = self.pending.popleft()
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                if correlation_id != request.correlation_id:
                    raise ProxyError(
                        f"response correlation id {correlation_id}, expected {request.correlation_id} "
                        f"(api key {request.api_key})"
                    )
                if request.frame is not None:
                    self.proxy._record(request.frame, frame[4:])
                if request.api_key == PRODUCE and self.proxy.withhold_produce_responses:
                    self.proxy._count("withheld")  # the client waits on; only a broken connection ends it
                    if request.fault is not None:
                        self.proxy._refund(request.fault)
                    continue
                if request.fault is None:
                    out += frame
                    continue
                # A fault: first deliver what came before it, in order.
                if out and not await _send(self.client, out):
                    self.close("client connection broken")
                    return
                out = bytearray()
                if request.fault == DROP_RESPONSE:
                    self.proxy._count(DROP_RESPONSE)
                    self.close(f"{DROP_RESPONSE} (correlation id {correlation_id})")
                    return
                if request.fault == CUT_RESPONSE:
                    await _send(self.client, frame[: len(frame) // 2])
                    self.proxy._count(CUT_RESPONSE)
                    self.close(f"{CUT_RESPONSE} (correlation id {correlation_id})")
                    return
                assert request.fault == DELAY_RESPONSE
                self.proxy._count(DELAY_RESPONSE)
                self.proxy._event(self.number, f"{DELAY_RESPONSE} (correlation id {correlation_id})")
                self.delaying = True
                await trio.sleep(self.proxy.schedule.delay_s)
                self.delaying = False
                out += frame
            if out and not await _send(self.client, out):
                self.close("client connection broken")
                return


async def _receive(stream: trio.SocketStream) -> bytes:
    try:
        return await stream.receive_some(_READ)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return b""


async def _send(stream: trio.SocketStream, data: bytes | bytearray) -> bool:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return False
    return True


class FaultProxy:
    """``with FaultProxy() as proxy: ...``; set ``upstream_port`` before clients connect."""

    def __init__(self, schedule: FaultSchedule | None = None, upstream_port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.schedule = schedule or FaultSchedule()
        self.enabled = True
        # While set, every Produce response is swallowed (connections stay open): set it just before
        # killing the broker, so batches the broker wrote are still unacknowledged when it dies.
        self.withhold_produce_responses = False
        # While set, every (Produce request, its response from the broker) pair is kept in
        # ``produce_exchanges``, frames without their size prefix, whatever the client then got.
        self.record_produce = False
        self.produce_exchanges: list[tuple[bytes, bytes]] = []
        # While set to an API key, a request of that API never reaches the broker: the proxy closes
        # the connection instead (counted in ``swallowed``), so the client cannot know its fate.
        self.swallow_api: int | None = None
        self.counters: Counter[str] = Counter()
        # (seconds since start, connection number, what happened): faults and why connections ended.
        self.events: deque[tuple[float, int, str]] = deque(maxlen=2000)
        self._started = time.monotonic()
        self._numbers = itertools.count(1)
        self.port = 0
        self._lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._root: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None
        self._crash: BaseException | None = None

    # -- the test's side (any thread) --------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def injected(self) -> dict[str, int]:
        """Faults that happened, by kind."""
        with self._lock:
            return {kind: self.counters[kind] for kind in KINDS}

    def reset(self, schedule: FaultSchedule, *, enabled: bool = True) -> None:
        """A new schedule and zeroed counters (existing connections keep their pending faults)."""
        with self._lock:
            self.schedule = schedule
            self.counters.clear()
            self.events.clear()
            self.produce_exchanges.clear()
            self.enabled = enabled

    def start(self) -> FaultProxy:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"fault proxy did not start: {self._crash!r}")
        if self._crash is not None:
            raise RuntimeError("fault proxy crashed at start") from self._crash
        return self

    def close(self) -> None:
        """Cancel every task, wait for the thread, re-raise whatever crashed the proxy."""
        if self._thread is None:
            return
        if self._thread.is_alive() and self._token is not None and self._root is not None:
            try:
                trio.from_thread.run_sync(self._root.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(10)
        alive = self._thread.is_alive()
        self._thread = None
        if alive:
            raise RuntimeError("fault proxy thread did not stop")
        if self._crash is not None:
            raise RuntimeError("the fault proxy crashed") from self._crash

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # -- the trio side ----------------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        try:
            trio.run(self._main, ready)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread by close()
            self._record_crash(exc)
            log.exception("fault proxy crashed")
            ready.set()

    async def _main(self, ready: threading.Event) -> None:
        self._token = trio.lowlevel.current_trio_token()
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            self._root = nursery.cancel_scope
            ready.set()
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    async def _handle(self, client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream_port)
        except OSError:
            self._count("upstream_refused")
            await trio.aclose_forcefully(client)
            return
        await _Connection(self, client, upstream).run()

    def _decide(self) -> str | None:
        with self._lock:
            return self.schedule.decide() if self.enabled else None

    def _refund(self, kind: str) -> None:
        with self._lock:
            self.schedule.refund(kind)
            self.counters["refunded"] += 1

    def _record_crash(self, exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            _, exc = exc.split(trio.Cancelled)
        if exc is not None and not isinstance(exc, trio.Cancelled) and self._crash is None:
            self._crash = exc

    def _record(self, request: bytes, response: bytes) -> None:
        with self._lock:
            self.produce_exchanges.append((request, response))

    def _count(self, name: str) -> int:
        with self._lock:
            self.counters[name] += 1
            return self.counters[name]

    def _event(self, connection: int, text: str) -> None:
        with self._lock:
            self.events.append((round(time.monotonic() - self._started, 3), connection, text))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.counters)
