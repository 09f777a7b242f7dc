"""A throwaway PostgreSQL server for tests: initdb + pg_ctl in a temporary directory.

Uses Debian's ``postgresql`` package (``/usr/lib/postgresql/<version>/bin``) or whatever
``initdb`` is on ``PATH``. PostgreSQL refuses to run as root, so as root the cluster is created
and started as the unprivileged ``postgres`` user (``runuser``). The server listens on
127.0.0.1 only, on a free port, with trust authentication for one database ``kproto``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DATABASE = "kproto"
USER = "kproto"


def find_bin_dir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` live, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent  # Debian links initdb into PATH; createdb stays beside it
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running throwaway server; ``url`` is what ``kproto serve --storage`` takes."""

    bin_dir: Path
    root: Path
    port: int
    run_as: str | None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}\n{self.log_tail()}")

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.run_as is not None:
            shutil.chown(self.root, self.run_as)
            os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data_dir), "-U", USER, "-A", "trust", "--no-sync", "-E", "UTF8")
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\nmax_connections = 200\n"
                "shared_buffers = 64MB\nfsync = on\nsynchronous_commit = on\n"
            )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-w", "-t", "90", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, DATABASE)

    def stop(self, mode: str = "fast") -> None:
        """``fast`` (clean), or ``immediate`` (like a crash: WAL replay at the next start)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "-t", "90", "stop")

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-w", "-t", "90", "start")

    def bounce(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m mode``: stop (``fast``, or ``immediate`` like a crash) and start again."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-m", mode, "-w", "-t",
                  "90", "restart")

    def promote(self) -> None:
        """A standby becomes a primary (``pg_ctl promote``), waiting until it accepts writes."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-t", "90", "promote")

    def postmaster_pid(self) -> int:
        """The running server's postmaster (first line of ``postmaster.pid``); OSError or
        ValueError when it is not running."""
        return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def kill(self) -> None:
        """SIGKILL the postmaster and its children, as if the machine died (no shutdown, no WAL flush
        beyond what was already written)."""
        try:
            pid = self.postmaster_pid()
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        if str(self.data_dir).encode() not in command:
            return  # a stale file (killed before): that pid is not this server any more
        children = [pid, *_children_of(pid)]
        for each in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.root / "server.log").read_text().splitlines()[-lines:])
        except OSError:
            return ""


def _children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def new_server(base: Path, bin_dir: Path | None = None) -> PostgresServer:
    """An initialised (not started) server in ``base``/pg, on a free port, run as ``postgres`` when root."""
    bin_dir = bin_dir or find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    run_as = "postgres" if os.geteuid() == 0 else None
    if run_as is not None:
        os.chmod(base, 0o755)  # the postgres user must reach its directory inside
    server = PostgresServer(bin_dir, base / "pg", _free_port(), run_as)
    server.init()
    return server


def create_database(server: PostgresServer) -> str:
    """A fresh, empty database on ``server``; its URL."""
    import psycopg

    name = f"db_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    return server.url.rsplit("/", 1)[0] + "/" + name


@contextlib.contextmanager
def temporary_postgres() -> Iterator[PostgresServer]:
    """Start a fresh server; stop it and remove its files afterwards."""
    if find_bin_dir() is None:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    base = tempfile.mkdtemp(prefix="kproto-pg-")
    server: PostgresServer | None = None
    try:
        server = new_server(Path(base))
        server.start()
        yield server
    finally:
        if server is not None:
            with contextlib.suppress(subprocess.SubprocessError, OSError, RuntimeError):
                server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
