"""PostgreSQL for fault tests: one throwaway server, or a primary with a synchronous streaming standby.

The fault tests need to restart the database under the brokers (``pg_ctl restart -m fast`` or
``immediate``) and, with a standby, to fail over: the primary is SIGKILLed and the standby promoted.
The standby is made with ``pg_basebackup -R`` and the primary waits for it on every commit
(``synchronous_standby_names = '*'``, ``synchronous_commit = on``), so what a broker was told is
committed survives the failover. Brokers use the multi-host URL :attr:`Database.url`
(``target_session_attrs=read-write``): libpq connects to whichever server accepts writes.

As root the servers run as the ``postgres`` user (PostgreSQL refuses root), as
:mod:`.postgres` does.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

from .postgres import DATABASE, USER, PostgresServer, _free_port, new_server

log = logging.getLogger(__name__)

SYNC_TIMEOUT_S = 60.0


class Database:
    """A running primary (and, with ``standby=True``, its synchronous standby) under ``base`` (as
    root, ``base``'s parents must let the ``postgres`` user through)."""

    def __init__(self, base: Path, bin_dir: Path | None = None, *, standby: bool = False) -> None:
        (base / "primary").mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)  # as root the postgres user must reach the servers' directories
        self.primary = new_server(base / "primary", bin_dir)
        self.standby: PostgresServer | None = None
        self.failed_over = False
        self.primary.start()
        if standby:
            self.standby = self._make_standby(base / "standby")
        hosts = ",".join(f"127.0.0.1:{server.port}" for server in self.servers)
        # Every server, libpq taking the first that accepts writes; fixed for the brokers' lifetime.
        self.url = f"postgresql://{USER}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    @property
    def servers(self) -> list[PostgresServer]:
        return [self.primary] + ([self.standby] if self.standby is not None else [])

    def _make_standby(self, base: Path) -> PostgresServer:
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)
        primary = self.primary
        with (primary.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        with (primary.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 10\nwal_keep_size = 256MB\n")
        primary.bounce("fast")  # wal_level needs a restart (replica is the default: harmless)
        standby = PostgresServer(primary.bin_dir, base / "pg", _free_port(), primary.run_as)
        standby.root.mkdir(parents=True, exist_ok=True)
        if standby.run_as is not None:
            shutil.chown(standby.root, standby.run_as)
            standby.root.chmod(0o700)
        standby._run("pg_basebackup", "-D", str(standby.data_dir), "-R", "-X", "stream", "-c", "fast",
                     "-h", "127.0.0.1", "-p", str(primary.port), "-U", USER)
        with (standby.data_dir / "postgresql.conf").open("a") as conf:
            # Later lines win: its own port and socket; once promoted it waits for no standby.
            conf.write(f"port = {standby.port}\nunix_socket_directories = '{standby.root}'\n"
                       "synchronous_standby_names = ''\nhot_standby = on\n")
        standby._run("pg_ctl", "-D", str(standby.data_dir), "-l", str(standby.root / "server.log"), "-w", "-t", "90",
                     "start")
        with (primary.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("synchronous_standby_names = '*'\nsynchronous_commit = on\n")
        primary._run("pg_ctl", "-D", str(primary.data_dir), "reload")
        self._wait_synchronous()
        return standby

    def _wait_synchronous(self) -> None:
        """Until the primary reports its standby as synchronous (commits then wait for it)."""
        import psycopg

        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while True:
            with psycopg.connect(self.primary.url, autocommit=True) as conn:
                states = [row[0] for row in conn.execute("SELECT sync_state FROM pg_stat_replication").fetchall()]
            if "sync" in states:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby never became synchronous ({states})")
            time.sleep(0.1)

    def restart(self, mode: str) -> None:
        """``pg_ctl restart -m mode`` of the server accepting writes."""
        self.primary.bounce(mode)

    def failover(self) -> None:
        """SIGKILL the primary, promote the standby: from then on the promoted server is the primary
        (alone: the old one is not brought back)."""
        if self.standby is None or self.failed_over:
            raise RuntimeError("no standby to fail over to")
        self.primary.kill()
        self.standby.promote()
        self.failed_over = True
        self.primary, self.standby = self.standby, None
        log.info("failed over to the standby on port %d", self.primary.port)

    def close(self) -> None:
        for server in self.servers:
            try:
                server.stop("immediate")
            except (subprocess.SubprocessError, OSError, RuntimeError):
                server.kill()

    def log_tail(self) -> str:
        return "\n".join(f"--- postgres :{s.port}\n{s.log_tail()}" for s in self.servers)


def kill_leftovers(base: Path) -> int:
    """SIGKILL every server still running from a data directory under ``base`` (a run that was
    itself killed could not stop them); how many there were."""
    found = 0
    for pid_file in base.rglob("postmaster.pid"):
        server = PostgresServer(Path("/"), pid_file.parent.parent, 0, None)
        if (server.data_dir / "postmaster.pid").exists():
            server.kill()
            found += 1
    return found
