"""The metrics endpoint: ``GET /metrics`` (Prometheus text), ``/healthz`` (the process is up) and
``/readyz`` (recovery done and listeners open: 200, else 503), served with h11 from the broker's
own event loop. One request per connection, bounded in size (h11's limit) and time. ``/metrics``
is answered with ``BrokerMetrics.scrape`` (a recent rendering is reused, a new one yields to the
loop while it is formatted), gzipped when the client accepts it (Prometheus does).

The listener holds at most ``kproto.metrics.max.connections`` connections, each for at most
``kproto.metrics.connections.max.idle.ms``: a connection beyond the cap is accepted and closed at
once (one log line per interval), so idle sockets on this port can never take the descriptors
Kafka clients and the log need; the cap is kept out of the Kafka listeners' default
``max.connections`` (``connection_limits.py``). Out of descriptors, accepting waits and retries
with a rate-limited warning, as the Kafka listeners do.
"""

from __future__ import annotations

import logging

import h11
import trio

from .connection_limits import ACCEPT_RETRY_S, RESOURCE_ERRNOS
from .log_limits import RateLimitedLog
from .metrics import CONTENT_TYPE, BrokerMetrics

log = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS = 16
REQUEST_TIMEOUT_S = 10.0  # the default idle timeout: a connection's whole request and answer
RECEIVE_SIZE = 16 * 1024
REFUSALS_INTERVAL_S = 10.0  # refusals (and accept failures) are logged once per interval


def route(metrics: BrokerMetrics, method: str, target: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request; pure, so it is tested without sockets."""
    path = target.split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return 405, "text/plain", b"method not allowed\n"
    if path == "/metrics":
        return 200, CONTENT_TYPE, metrics.exposition()
    if path == "/healthz":
        return 200, "text/plain", b"ok\n"
    if path == "/readyz":
        return (200, "text/plain", b"ready\n") if metrics.ready else (503, "text/plain", b"starting\n")
    return 404, "text/plain", b"not found: /metrics, /healthz, /readyz\n"


async def serve_metrics(
    listeners: list[trio.SocketListener], metrics: BrokerMetrics, *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS, idle_s: float = REQUEST_TIMEOUT_S,
) -> None:
    """Serve the endpoint on ``listeners`` until cancelled, within ``max_connections`` open at once."""
    endpoint = _Endpoint(metrics, max_connections, idle_s)
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(endpoint.accept_loop, listener, nursery)


class _Endpoint:
    """The connection cap and the accept loop of the metrics listeners (all of them share the cap)."""

    def __init__(self, metrics: BrokerMetrics, max_connections: int, idle_s: float) -> None:
        self.metrics = metrics
        self.max_connections = max_connections
        self.idle_s = idle_s
        self.open = 0
        self.warnings = RateLimitedLog(log, REFUSALS_INTERVAL_S, burst=1)

    async def accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except trio.ClosedResourceError:
                return
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    raise
                self.warnings.warning("accept", "metrics listener cannot accept a connection (%s); %d open, retrying",
                                      exc.strerror, self.open)
                await trio.sleep(ACCEPT_RETRY_S)
                continue
            if self.open >= self.max_connections:
                self.warnings.warning("refused", "refusing a metrics connection from %s: "
                                      "kproto.metrics.max.connections=%d reached", _peer(stream), self.max_connections)
                await trio.aclose_forcefully(stream)
                continue
            self.open += 1
            nursery.start_soon(self.handle, stream)

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(self.idle_s):
                await _answer(stream, self.metrics)
        except (trio.BrokenResourceError, h11.RemoteProtocolError) as exc:
            log.debug("metrics client dropped: %s", exc)
        except Exception:  # one bad scrape must never take the broker down
            log.exception("metrics request failed")
        finally:
            self.open -= 1
            await trio.aclose_forcefully(stream)  # a socket closes at once, even when cancelled


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


async def _answer(stream: trio.SocketStream, metrics: BrokerMetrics) -> None:
    connection = h11.Connection(h11.SERVER)
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(RECEIVE_SIZE))
            continue
        if isinstance(event, h11.Request):
            break
        return  # closed before a request
    method, target = event.method.decode(), event.target.decode()
    headers = [("connection", "close")]
    if method in ("GET", "HEAD") and target.split("?", 1)[0] == "/metrics":
        gzipped = any(name == b"accept-encoding" and b"gzip" in value.lower() for name, value in event.headers)
        status, content_type, body = 200, CONTENT_TYPE, await metrics.scrape(gzipped)
        if gzipped:
            headers.append(("content-encoding", "gzip"))
    else:
        status, content_type, body = route(metrics, method, target)
    headers += [("content-type", content_type), ("content-length", str(len(body)))]
    # One send for the whole response: a write on loopback costs the receiver's side too.
    response = [connection.send(h11.Response(status_code=status, headers=headers)) or b""]
    if event.method != b"HEAD":
        response.append(connection.send(h11.Data(data=body)) or b"")
    response.append(connection.send(h11.EndOfMessage()) or b"")
    await stream.send_all(b"".join(response))
