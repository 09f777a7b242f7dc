"""The faults verify-eos can inject when given the means: a broker command it may kill, restart and
pause, and a TCP proxy between the clients and the broker whose connections it may cut.

Both are plain threads and processes (the workload's clients are blocking libraries); every thread
is a daemon owned by the object that started it and stopped by ``close``.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import socket
import subprocess
import threading
import time

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0


def shut_down(*sockets: socket.socket) -> None:
    """Both directions of each socket closed (the peer sees the connection end), errors ignored."""
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def wait_for_port(host: str, port: int, timeout: float = START_TIMEOUT_S,
                  process: subprocess.Popen[bytes] | None = None) -> None:
    """Until something listens on ``host:port``; a ``process`` that exits meanwhile fails it at once."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process for {host}:{port} exited with {process.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f} s") from None
            time.sleep(0.05)


class BrokerCommand:
    """A broker started from a shell command line, killed with SIGKILL, paused with SIGSTOP."""

    def __init__(self, command: str, bootstrap: str, log_path: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        """``env``: the process's whole environment (default: this process's)."""
        self.command = command
        self.env = env
        host, _, port = bootstrap.rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            shlex.split(self.command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=self.env,
        )
        if out is not subprocess.DEVNULL:
            out.close()  # type: ignore[union-attr]
        wait_for_port(self.host, self.port, process=self.process)

    def _signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        if self.process is None:
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        self.process.wait(30)
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        """SIGSTOP: the process freezes (sockets stay open, nothing is answered)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def pause(self, seconds: float) -> None:
        self._signal(signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            self._signal(signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(10)
            self.process = None


class CuttingProxy:
    """Forwards TCP connections from ``listen`` to ``upstream``; :meth:`cut` drops them all.

    Clients learn broker addresses from Metadata, so the broker must advertise the proxy's address
    for the clients to stay behind it."""

    def __init__(self, listen: str, upstream: str) -> None:
        host, _, port = listen.rpartition(":")
        self.upstream = upstream.rpartition(":")[0] or "127.0.0.1", int(upstream.rpartition(":")[2])
        self.server = socket.create_server((host or "127.0.0.1", int(port)), reuse_port=False)
        self.address = f"{self.server.getsockname()[0]}:{self.server.getsockname()[1]}"
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        self.cuts = 0
        self._thread = threading.Thread(target=self._accept, name="verify-eos-proxy", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            shut_down(source, target)

    def cut(self) -> None:
        """Close every connection through the proxy at once (both sides see it die)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            shut_down(*pair)
            for sock in pair:
                sock.close()
        self.cuts += 1

    def close(self) -> None:
        self._closed = True
        self.server.close()
        self.cut()
        self._thread.join(5)
