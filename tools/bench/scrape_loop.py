"""The scraper of ``tools.bench.scrape_cost``, as a process of its own.

    python -m tools.bench.scrape_loop URL EVERY_S [gzip|identity]

GETs ``URL`` every ``EVERY_S`` seconds until its stdin closes, then prints one JSON line: each
scrape's latency in ms, the last body's size (as sent and unpacked) and line count, the errors
and its own CPU seconds. It accepts gzip, as Prometheus does, unless told ``identity``.

It runs apart from the benchmark's producer so that the scraping client's own cost (the GIL and
CPU a thread in the producer's process would take) is not counted as the broker's, and speaks
HTTP/1.1 over a plain socket (one request per connection, read to the close): urllib took about
2 CPU-ms per scrape, as much as the broker, on the same two cores as the producer. Only the last
answer is parsed.
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time
from urllib.parse import urlsplit


def get(host: str, port: int, request: bytes) -> bytes:
    """The whole answer to ``request`` (the server closes the connection after it)."""
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(request)
        chunks = []
        while chunk := connection.recv(1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


def body_of(answer: bytes) -> tuple[bytes, bytes]:
    """(body as sent, body unpacked) of a 200 answer."""
    head, _, sent = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        raise OSError(f"answered {lines[0]!r}")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(b":") for line in lines[1:])}
    length = int(headers.get(b"content-length", len(sent)))
    if len(sent) != length:
        raise OSError(f"{len(sent)} of {length} body bytes")
    return sent, gzip.decompress(sent) if headers.get(b"content-encoding") == b"gzip" else sent


def main(argv: list[str]) -> int:
    url, every_s = urlsplit(argv[0]), float(argv[1])
    encoding = argv[2] if len(argv) > 2 else "gzip"
    host, port = url.hostname or "127.0.0.1", url.port or 80
    request = (f"GET {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\nAccept-Encoding: {encoding}\r\n"
               "Connection: close\r\n\r\n").encode()
    stop = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    latencies_ms: list[float] = []
    errors: list[str] = []
    last = b""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    next_at = time.monotonic()
    while not stop.is_set():
        began = time.perf_counter()
        try:
            answer = get(host, port, request)
            latencies_ms.append((time.perf_counter() - began) * 1000)
            if not answer.startswith(b"HTTP/1.1 200"):
                errors.append(answer[:80].decode(errors="replace"))
            last = answer
        except OSError as exc:
            errors.append(str(exc))
        next_at += every_s
        stop.wait(max(0.0, next_at - time.monotonic()))
    sent = body = b""
    if last:
        try:
            sent, body = body_of(last)
        except (OSError, ValueError) as exc:
            errors.append(str(exc))
    json.dump({"latencies_ms": latencies_ms, "bytes": len(body), "sent_bytes": len(sent), "lines": body.count(b"\n"),
               "errors": errors, "cpu_s": time.process_time()}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
