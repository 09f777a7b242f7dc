"""The zombie producer of verify-eos, in a process of its own.

A fenced transactional producer that writes and commits anyway must be refused by the broker;
whatever its client library does meanwhile must not take the checker down. Destroying a fenced
confluent-kafka producer has aborted the whole verify-eos process (glibc "double free or
corruption", SIGABRT; issue #41), so the zombie lives in a child process (``python -m
rivven_kproto.verify.zombie CONFIG``) and the parent only learns what happened to it: fenced as
expected, committed (an anomaly of the broker's), or the client crashed (signal N: the client's
fault, reported as such).

The child speaks JSON lines: on stdout ``{"event": "ready", ...}`` once its transaction is open
with a record written, then ``{"event": "outcome", ...}`` after the attempt its parent asks for
with ``{"attempt": [topic, partition, value]}`` on stdin (end of input: stop without one).
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any

from .clients import _RETIRED, ClientFailure, TxnClient, open_client

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 180.0  # start-up, init_transactions (retried under faults) and a flushed record
ATTEMPT_TIMEOUT_S = 90.0  # the attempt's commit has 10 s; generous for a loaded machine
EXIT_TIMEOUT_S = 30.0  # the child destroying its client and exiting
COMMIT_TIMEOUT_S = 10.0


def readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has input within ``timeout_s``. (Not ``select.select``: the checker holds many
    client sockets, and select refuses a descriptor numbered 1024 or more: seed 13 died of it.)"""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout_s))


@dataclass
class Outcome:
    """What became of a zombie: ``result`` is ``committed``, ``failed`` (``error``: Kafka's error
    name, fenced as expected), ``crashed`` (the client died, ``signal``) or ``hung``."""

    result: str
    error: str = ""
    fatal: bool = False
    acks: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    signal: int | None = None  # the signal the child died of (at any point)
    stderr: str = ""  # the child's last words (glibc's message, a traceback)

    @property
    def crash(self) -> str:
        """The client crash in a sentence, or ``""`` when the child did not die of a signal."""
        if self.signal is None:
            return ""
        name = signal.Signals(self.signal).name if self.signal in signal.valid_signals() else f"signal {self.signal}"
        last = " | ".join(line.strip() for line in self.stderr.strip().splitlines()[-2:])
        return f"the zombie's client process died of {name}" + (f": {last}" if last else "")


class ZombieProcess:
    """The parent's handle on one zombie child; ``command`` is replaceable for tests."""

    def __init__(self, config: dict[str, Any], command: list[str] | None = None) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        env = dict(os.environ, LIBC_FATAL_STDERR_="1")  # glibc's abort message to stderr, not the tty
        self.process = subprocess.Popen(
            [*(command or [sys.executable, "-m", "rivven_kproto.verify.zombie"]), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
        )
        self._buffer = b""
        self.ready: Outcome | None = None
        self.done: Outcome | None = None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> Outcome:
        """The child's transaction is open (``result`` ``ready``), or why not."""
        self.ready = self._event(timeout_s) or self._ended()
        return self.ready

    def attempt(self, topic: str, partition: int, value: str, timeout_s: float = ATTEMPT_TIMEOUT_S) -> Outcome:
        """Ask the (fenced) child to write ``value`` and commit; what happened, the exit included."""
        if self.ready is not None and self.ready.result != "ready":
            return self._ended(self.ready)
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"attempt": [topic, partition, value]}).encode() + b"\n")
            self.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died already: said below
        return self._ended(self._event(timeout_s))

    def stop(self) -> Outcome:
        """End the child without an attempt (what went wrong at start-up, if something did)."""
        return self._ended(self.ready if self.ready is not None and self.ready.result != "ready" else None)

    def _event(self, timeout_s: float) -> Outcome | None:
        """The child's next JSON line, or None when it ended or stayed silent for ``timeout_s``."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not readable(fd, left):
                return Outcome("hung", error=f"no answer in {timeout_s:.0f} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        doc = json.loads(line)
        acks = {value: (t, p, o) for value, (t, p, o) in doc.get("acks", {}).items()}
        return Outcome(doc["result"], doc.get("error", ""), doc.get("fatal", False), acks)

    def _ended(self, outcome: Outcome | None = None) -> Outcome:
        """Close the child's input, reap it (killed if it will not end) and add how it ended."""
        if self.done is not None:
            return self.done
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        killed = False
        try:
            code = self.process.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()  # hung: its end is ours, not a crash
            code, killed = self.process.wait(), True
        if outcome is None:
            outcome = Outcome("crashed" if code < 0 else "failed", error=f"exit status {code}" if code >= 0 else "")
        if code < 0 and not killed:
            outcome.signal = -code
        self._stderr.seek(0)
        outcome.stderr = self._stderr.read()[-2000:].decode(errors="replace")
        self._stderr.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.done = outcome
        return outcome


def _say(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def _failure(error: ClientFailure) -> dict[str, Any]:
    return {"result": "failed", "error": error.name, "fatal": error.fatal}


def _init(client: TxnClient, retry_s: float) -> None:
    """init_transactions, retried while its errors are retriable (a broker restarting)."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            client.init(60.0)
            return
        except ClientFailure as error:
            if error.fatal or not error.retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def child(config: dict[str, Any]) -> None:
    """The zombie: open its transaction with one record written, wait to be fenced (its parent
    opens the next instance), then write once more and commit when told."""
    client = open_client(config["library"], {k: config[k] for k in (
        "bootstrap", "transactional_id", "transaction_timeout_ms", "linger_ms")})
    topic, partition, value = config["first"]
    try:
        _init(client, config.get("retry_s", 300.0))
        client.begin()
        client.send(topic, partition, value)
        client.flush(30.0)
    except ClientFailure as error:
        _say({"event": "ready", **_failure(error), "acks": client.acks})
        return
    _say({"event": "ready", "result": "ready", "acks": client.acks, "errors": [e.name for e in client.delivery_errors]})
    line = sys.stdin.readline()
    if not line:
        return
    topic, partition, value = json.loads(line)["attempt"]
    try:
        client.send(topic, partition, value)
        client.commit(COMMIT_TIMEOUT_S)
        doc: dict[str, Any] = {"result": "committed"}
    except ClientFailure as error:
        doc = _failure(error)
    except Exception as exc:  # noqa: BLE001 - e.g. a state error raised as another type
        doc = {"result": "failed", "error": type(exc).__name__, "fatal": True}
    _say({"event": "outcome", **doc, "acks": client.acks})
    client.close()
    _RETIRED.clear()  # destroyed here, on purpose: a crash doing so is this process's alone


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    child(json.loads(sys.argv[1]))
