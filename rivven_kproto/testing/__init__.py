"""A real broker for other projects' tests: in this process, on a free port, in a throwaway directory.

    from rivven_kproto.testing import broker

    with broker() as kafka:
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})

The broker runs ``trio.run`` on a daemon thread of the calling process (no JVM, no container, no
subprocess start-up), serves every client the project supports, and is cancelled and joined by
:meth:`EmbeddedBroker.stop`. The pytest plugin (:mod:`rivven_kproto.testing.plugin`, installed
with the package) builds its fixtures on it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0


def memory_directory(prefix: str = "kproto-") -> Path:
    """A fresh directory in RAM where the system has one (/dev/shm), else in the temp directory."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and shutil.disk_usage(shm).free > 256 << 20 else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


class EmbeddedBroker:
    """One broker on a thread of this process; ``start`` returns once it listens."""

    def __init__(self, data_dir: Path | None = None, *, host: str = "127.0.0.1", **settings: Any) -> None:
        """``settings``: fields of :class:`~rivven_kproto.broker.config.BrokerConfig` (e.g.
        ``num_partitions=3``, ``fsync="never"``); ``data_dir=None`` is a directory in RAM, removed
        by ``stop``."""
        self._owned = data_dir is None
        self.data_dir = data_dir if data_dir is not None else memory_directory()
        self.host = host
        self.settings = settings
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._token: Any = None
        self._scope: Any = None
        self._failure: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker is not running")
        return f"{self.host}:{self.port}"

    def start(self) -> EmbeddedBroker:
        self._thread = threading.Thread(target=self._run, name=f"rivven-kproto-broker-{id(self):x}", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the embedded broker did not start within {START_TIMEOUT_S:.0f} s")
        if self._failure is not None:
            raise RuntimeError(f"the embedded broker failed to start: {self._failure}") from self._failure
        return self

    def _run(self) -> None:
        import trio

        from rivven_kproto.broker.config import BrokerConfig
        from rivven_kproto.server.app import serve

        config = BrokerConfig(
            listen_host=self.host, listen_port=0, advertised_host=self.host, data_dir=self.data_dir, **self.settings
        )

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    self.port = await nursery.start(serve, config)
                    self._ready.set()

        try:
            trio.run(main)
        except BaseException as exc:  # noqa: BLE001 - reported to the thread that called start()
            self._failure = exc
        finally:
            self._ready.set()

    def stop(self) -> None:
        """Shut the broker down cleanly (as SIGTERM would) and remove a directory it made."""
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive() and self._token is not None:
            import trio

            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
            thread.join(START_TIMEOUT_S)
        self.port = None
        if self._owned:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextmanager
def broker(data_dir: Path | None = None, **settings: Any) -> Iterator[EmbeddedBroker]:
    """``with broker() as kafka:`` a running broker at ``kafka.bootstrap``, stopped on exit."""
    embedded = EmbeddedBroker(data_dir, **settings).start()
    try:
        yield embedded
    finally:
        embedded.stop()
