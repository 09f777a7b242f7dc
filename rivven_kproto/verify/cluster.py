"""verify-eos's cluster: N ``kproto serve`` processes on one PostgreSQL database, each behind a proxy.

The supervisor starts the database (:mod:`rivven_kproto.testing.pg_replication`, with a synchronous
standby on request), then the brokers (node ids 1..N, node 1 first: it takes the coordinator lease),
each advertising its own :class:`~.faults.CuttingProxy` so every client connection can be cut. It
answers the nemesis's questions (who is the controller, who coordinates a key, who leads a
partition) with this project's own client, bounded in time.

Like a service manager (systemd's ``Restart=always``), a watchdog thread restarts a broker that
exits by itself: ours stops on purpose when it finds, after the database was away, that another
broker took its lease or shards ("restart it to serve again"). Brokers the nemesis holds down are
left alone. Every process and thread it started is stopped by :meth:`Cluster.close`.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rivven_kproto.testing.pg_replication import Database

from .faults import BrokerCommand, CuttingProxy

log = logging.getLogger(__name__)

MEET_TIMEOUT_S = 120.0
START_ATTEMPTS = 5  # ports tried per broker at start
WATCH_INTERVAL_S = 0.5
ASK_TIMEOUT_S = 3.0
# As the compat tests' brokers (compat_tests/test_eos.py): the pollers' sessions may be short, and
# a group's first rebalance does not wait for more members.
BROKER_ENV = {"KPROTO_GROUP_MIN_SESSION_TIMEOUT_MS": "1000", "KPROTO_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """``size`` brokers on one database under ``work_dir`` (logs: ``n<node>.log``, ``postgres/``)."""

    def __init__(self, work_dir: Path, size: int = 3, *, postgres_bin: Path | None = None, standby: bool = False) -> None:
        self.work_dir, self.size = work_dir.resolve(), size
        self.postgres_bin, self.with_standby = postgres_bin, standby
        self.database: Database | None = None
        self.brokers: dict[int, BrokerCommand] = {}
        self.proxies: dict[int, CuttingProxy] = {}
        self.on_exit: Callable[[int, int], None] = lambda node, code: None  # a broker exited by itself
        self._lock = threading.Lock()
        self._held: set[int] = set()  # brokers the nemesis holds down (or is restarting)
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        """What clients are given: every broker's proxy."""
        return ",".join(proxy.address for proxy in self.proxies.values())

    def start(self) -> Cluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.database = Database(self._database_dir(), self.postgres_bin, standby=self.with_standby)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
        env.update(BROKER_ENV)
        for node in range(1, self.size + 1):
            self._start_node(node, env)
        self.wait_met()
        log.info("cluster of %d up on %s (database %s)", self.size, self.bootstrap, self.database.url)
        self._watchdog = threading.Thread(target=self._watch, name="verify-eos-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def _start_node(self, node: int, env: dict[str, str]) -> None:
        """Start broker ``node`` behind a new proxy on a free port; a port another process took
        between the probe and the broker's bind (others run on the machine) gets a new one."""
        log_path = self.work_dir / f"n{node}.log"
        assert self.database is not None
        for _ in range(START_ATTEMPTS):
            port = _free_port()
            proxy = CuttingProxy("127.0.0.1:0", f"127.0.0.1:{port}")
            command = shlex.join([
                sys.executable, "-m", "rivven_kproto", "serve", "--storage", self.database.url, "--node-id", str(node),
                "--listen", f"127.0.0.1:{port}", "--advertised-listener", proxy.address,
                "--data-dir", str(self.work_dir / f"n{node}-data"),
            ])
            broker = BrokerCommand(command, f"127.0.0.1:{port}", str(log_path), env)
            logged = log_path.stat().st_size if log_path.exists() else 0
            broker.start()  # returns once the port answers: possibly another process's
            deadline = time.monotonic() + MEET_TIMEOUT_S
            while time.monotonic() < deadline and broker.process is not None and broker.process.poll() is None:
                with open(log_path, "rb") as text:
                    text.seek(logged)
                    if b"listening on" in text.read():
                        self.proxies[node], self.brokers[node] = proxy, broker
                        return
                time.sleep(0.1)
            proxy.close()
            broker.kill()
            log.warning("node %d did not start on port %d (see %s); trying another port", node, port, log_path)
        raise RuntimeError(f"node {node} did not start in {START_ATTEMPTS} attempts (see {log_path})")

    def _database_dir(self) -> Path:
        """``work_dir``/postgres, or (as root, when the postgres user cannot get through
        ``work_dir``'s parents, e.g. pytest's 0700 directories) a directory in the temp directory,
        named in ``work_dir``/postgres.path."""
        inside = self.work_dir / "postgres"
        if os.geteuid() != 0 or all(p.stat().st_mode & 0o001 for p in self.work_dir.parents):
            self.work_dir.chmod(0o755)
            return inside
        outside = Path(tempfile.mkdtemp(prefix="verify-eos-pg-"))
        outside.chmod(0o755)
        (self.work_dir / "postgres.path").write_text(str(outside))
        log.info("PostgreSQL in %s (the postgres user cannot reach %s)", outside, inside)
        return outside

    def wait_met(self) -> None:
        """Until every broker is listed as live (bounded)."""
        deadline = time.monotonic() + MEET_TIMEOUT_S
        while self.live_nodes() != set(self.brokers):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the brokers never met (live: {self.live_nodes()})")
            time.sleep(0.2)

    def kill(self, node: int) -> None:
        """SIGKILL ``node`` and hold it down (the watchdog leaves it) until :meth:`revive`."""
        with self._lock:
            self._held.add(node)
        self.brokers[node].kill()

    def revive(self, node: int) -> None:
        try:
            self.brokers[node].start()
        finally:
            with self._lock:
                self._held.discard(node)

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            for node, broker in self.brokers.items():
                with self._lock:
                    process = broker.process
                    if node in self._held or process is None or process.poll() is None:
                        continue
                    self._held.add(node)
                log.warning("node %d exited by itself (%s): restarting it", node, process.returncode)
                self.on_exit(node, process.returncode)
                try:
                    if not self._stopping.is_set():
                        broker.start()
                except Exception:  # noqa: BLE001 - tried again at the next round
                    log.exception("restarting node %d", node)
                finally:
                    with self._lock:
                        self._held.discard(node)

    def direct(self, node: int) -> str:
        broker = self.brokers[node]
        return f"{broker.host}:{broker.port}"

    def _ask(self, node: int, topics: list[str], groups: list[str], tids: list[str]) -> dict[str, Any]:
        """Metadata and coordinators as ``node`` answers them (our client, straight to the broker)."""
        import trio

        from rivven_kproto.client.client import KafkaClient
        from rivven_kproto.client.coordinator import KeyType, coordinators

        async def ask() -> dict[str, Any]:
            with trio.fail_after(3 * ASK_TIMEOUT_S):
                return await answer()

        async def answer() -> dict[str, Any]:
            async with KafkaClient(self.direct(node), timeout=ASK_TIMEOUT_S) as client:
                metadata = await client.metadata(topics)
                return {
                    "brokers": set(metadata.brokers),
                    "controller": metadata.controller_id,
                    "leaders": {(t, p.partition): p.leader for t, info in metadata.topics.items() for p in info.partitions},
                    "groups": await coordinators(client, KeyType.GROUP, groups) if groups else {},
                    "transactions": await coordinators(client, KeyType.TRANSACTION, tids) if tids else {},
                }

        return trio.run(ask)

    def ask(self, nodes: list[int], topics: Sequence[str] = (), groups: Sequence[str] = (),
            tids: Sequence[str] = ()) -> dict[str, Any] | None:
        """The first answer of ``nodes`` (running, not paused ones), None when none answered."""
        for node in nodes:
            try:
                return self._ask(node, list(topics), list(groups), list(tids))
            except Exception as exc:  # noqa: BLE001 - a broker mid-fault: ask another
                log.debug("node %d did not answer: %s", node, exc)
        return None

    def live_nodes(self) -> set[int]:
        """The brokers the cluster lists, as the first broker that answers says."""
        answer = self.ask(sorted(self.brokers))
        return set(answer["brokers"]) if answer else set()

    def remove_database_dir(self) -> None:
        """The database directory kept outside ``work_dir``, if any (after :meth:`close`)."""
        elsewhere = self.work_dir / "postgres.path"
        if elsewhere.exists():
            shutil.rmtree(elsewhere.read_text(), ignore_errors=True)

    def close(self) -> None:
        self._stopping.set()
        if self._watchdog is not None:
            self._watchdog.join(2 * 60)
        for proxy in self.proxies.values():
            proxy.close()
        for broker in self.brokers.values():
            try:
                broker.kill()  # the run is judged already: no clean shutdown needed
            except Exception:  # noqa: BLE001 - the others still get closed
                log.exception("closing a broker")
        if self.database is not None:
            self.database.close()


def kill_leftovers(work_dir: Path) -> int:
    """SIGKILL what a cluster run under ``work_dir`` left running when it was itself killed (its
    ``finally`` never ran): brokers whose data directory is there, and PostgreSQL servers. Found by
    that directory in their command line (/proc), nothing else; how many were killed."""
    import signal

    from rivven_kproto.testing.pg_replication import kill_leftovers as kill_servers

    marker = f"{work_dir.resolve()}/n".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"rivven_kproto\0serve" in command and marker in command:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    killed += kill_servers(work_dir)
    elsewhere = work_dir / "postgres.path"
    if elsewhere.exists():
        killed += kill_servers(Path(elsewhere.read_text()))
    return killed
