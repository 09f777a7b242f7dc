"""The metrics endpoint: ``GET /metrics`` (Prometheus text), ``/healthz`` (the process is up) and
``/readyz`` (recovery done and listeners open: 200, else 503), served with h11 from the broker's
own event loop. One request per connection, bounded in size (h11's limit) and time. ``/metrics``
is answered with ``BrokerMetrics.scrape`` (a recent rendering is reused, a new one yields to the
loop while it is formatted), gzipped when the client accepts it (Prometheus does)."""

from __future__ import annotations

import logging

import h11
import trio

from .metrics import CONTENT_TYPE, BrokerMetrics

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
RECEIVE_SIZE = 16 * 1024


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


async def serve_metrics(listeners: list[trio.SocketListener], metrics: BrokerMetrics) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(REQUEST_TIMEOUT_S):
                await _answer(stream, metrics)
        except (trio.BrokenResourceError, h11.RemoteProtocolError) as exc:
            log.debug("metrics client dropped: %s", exc)
        except Exception:  # one bad scrape must never take the broker down
            log.exception("metrics request failed")
        finally:
            await stream.aclose()  # a socket closes at once, even when cancelled (no forceful close needed)

    await trio.serve_listeners(handle, listeners)


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
