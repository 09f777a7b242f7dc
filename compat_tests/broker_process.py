"""Start and stop a real ``kproto serve`` process for the compatibility tests.

Only the process boundary is ours here: clients talk to the broker over TCP on 127.0.0.1, exactly
as they would to any Kafka broker.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

READY = re.compile(r"listening on [\d.]+:(\d+) advertised as")
OTHER_LISTENER = re.compile(r"listener \w+ \(\w+\) listening on")
START_TIMEOUT_S = 30.0


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path | None,
        log_path: Path,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        open_files_limit: int | None = None,
        cwd: Path | None = None,
    ) -> None:
        """``env``: extra environment for the broker process (e.g. ``KPROTO_FAULT``), applied on
        every ``start`` until changed; the caller's own ``KPROTO_*`` variables are never inherited.
        ``data_dir`` None: no ``--data-dir`` (the broker's default), started in ``cwd``."""
        self.data_dir = data_dir
        self.cwd = cwd
        self.log_path = log_path
        self.extra_args = extra_args or []
        self.env = dict(env or {})
        self.open_files_limit = open_files_limit  # RLIMIT_NOFILE (soft and hard) of the broker process
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0, timeout: float = START_TIMEOUT_S, give_up_on: str | None = None) -> BrokerProcess:
        """Start on ``port`` (0 = any free port) and wait (up to ``timeout``) for the ready line.

        ``give_up_on``: log text that means the start cannot succeed (a broker that retries a refused
        database forever); seeing it before the ready line kills the broker and raises at once,
        instead of waiting out ``timeout``."""
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        args = [
            sys.executable, "-m", "rivven_kproto", "serve",
            "--listen", f"127.0.0.1:{port}",
            "--advertised-listener", "127.0.0.1:0",
            *(["--data-dir", str(self.data_dir)] if self.data_dir is not None else []),
            *self.extra_args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
        env.update(self.env)
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, preexec_fn=self._limit_files,
            cwd=self.cwd,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            match = READY.search(text)
            # The broker logs its other listeners just after the ready line: wait for them too.
            if match and len(OTHER_LISTENER.findall(text)) >= self._other_listeners():
                self.port = int(match.group(1))
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{text}")
            if give_up_on is not None and give_up_on in text:
                self.kill()
                raise RuntimeError(f"broker logged {give_up_on!r} before it was ready:\n{text}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start within {timeout}s:\n{self.log_text()}")

    def _other_listeners(self) -> int:
        """How many listeners besides the first the ``--config`` file declares."""
        if "--config" not in self.extra_args:
            return 0
        config = Path(self.extra_args[self.extra_args.index("--config") + 1])
        for line in config.read_text().splitlines():
            if line.strip().startswith("listeners="):
                return max(0, len([item for item in line.split("=", 1)[1].split(",") if item.strip()]) - 1)
        return 0

    def _limit_files(self) -> None:
        if self.open_files_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self.process = None
        return code

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the process to exit by itself; its exit code, or None."""
        assert self.process is not None
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.process = None
        return code

    def kill(self) -> None:
        """SIGKILL: the crash path."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def restart(self) -> BrokerProcess:
        """Stop cleanly and start again on the same port and data directory."""
        port = self.port
        self.stop()
        return self.start(port or 0)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def module_broker(tmp_path_factory: pytest.TempPathFactory, name: str,
                  env: dict[str, str] | None = None) -> Iterator[BrokerProcess]:
    """The body of a test module's broker fixture (``yield from`` it): a broker started in a fresh
    directory, stopped at the end and its clean exit checked (its log tail shown if not)."""
    base: Path = tmp_path_factory.mktemp(name)
    process = BrokerProcess(base / "data", base / "broker.log", env=env).start()
    yield process
    if process.alive():
        assert process.stop() == 0, process.log_text()[-4000:]


def server_certificate(base: Path) -> tuple[Any, Path, Path]:
    """A throwaway CA (trustme) and a certificate for 127.0.0.1/localhost it signed, written under
    ``base``: server.pem (key and chain, the broker's PEM keystore) and ca.pem (what clients
    trust). Returns the CA too, for client certificates."""
    import trustme

    ca = trustme.CA()
    keystore, ca_file = base / "server.pem", base / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(ca_file))
    return ca, keystore, ca_file
