"""A recording TCP proxy: forwards bytes to the broker and keeps every request frame a client sent.

Used to check our codec against the bytes real clients put on the wire, not only against our own
encoder or the kio oracle. Plain threads and sockets (the tests are synchronous), bounded by the
test's lifetime: ``close()`` stops the listener and every pipe.
"""

from __future__ import annotations

import socket
import struct
import threading

from rivven_kproto.verify.faults import shut_down


class RecordingProxy:
    def __init__(self, upstream_port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        pending = b""
        try:
            while data := source.recv(65536):
                if record:
                    pending = self._record(pending + data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            shut_down(source, sink)

    def _record(self, buffer: bytes) -> bytes:
        while len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer)
            if len(buffer) < 4 + size:
                break
            with self._lock:
                self.frames.append(buffer[4 : 4 + size])
            buffer = buffer[4 + size :]
        return buffer

    def close(self) -> None:
        self._closed = True
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
