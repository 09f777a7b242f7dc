"""A TCP proxy that can stall: while stalled it forwards nothing in either direction and holds new
connections unanswered, closing nothing (as a network partition that drops packets looks to both
ends). Used between one broker and PostgreSQL: the broker is cut off from the database while its
database sessions, and the locks they hold, stay alive.

Threads, bounded: ``close()`` stops everything and joins the threads (each waits at most
``POLL_S`` before it sees the stop).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
from types import TracebackType

from rivven_kproto.verify.faults import shut_down

log = logging.getLogger(__name__)

POLL_S = 0.1
CHUNK = 64 * 1024


class StallProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._start(self._accept)

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _wait_flowing(self) -> bool:
        """Hold while stalled; False once the proxy is closing."""
        while not self._flowing.wait(POLL_S):
            if self._stop.is_set():
                return False
        return not self._stop.is_set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._start(self._connect, client)

    def _connect(self, client: socket.socket) -> None:
        if not self._wait_flowing():
            client.close()
            return
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, server]
        self._start(self._pump, client, server)
        self._start(self._pump, server, client)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([source], [], [], POLL_S)
                if not readable or not self._wait_flowing():
                    continue
                data = source.recv(CHUNK)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            shut_down(source, target)

    def close(self) -> None:
        self._stop.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            threads, sockets = list(self._threads), list(self._sockets)
        for thread in threads:
            thread.join(5 * POLL_S + 1)
        for sock in sockets:
            sock.close()

    def __enter__(self) -> StallProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
