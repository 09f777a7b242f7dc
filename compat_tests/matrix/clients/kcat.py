"""kcat (Debian's package, librdkafka inside): producer, consumer, balanced consumer, transactions.

kcat produces text lines (``key:value``, ``-Z`` for null) with one set of headers per run and no
per-record timestamps; it has no admin commands. A transactional run (``-X transactional.id``)
commits at end of input and aborts when it gets SIGINT/SIGTERM. kcat 1.7 reads its input 1024
bytes at a time, so to hold a transaction open after its records are sent we pad the input to a
multiple of 1024 bytes with empty lines (which kcat skips).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Any

from ...test_kcat import COMMON, KCAT
from ...test_kcat import kcat as run_kcat
from ..data import Profile, Rec, by_partition
from ..model import Client, Ctx
from .common import librdkafka_api_versions, until

_ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")


def _line(record: Rec) -> bytes:
    if record.key is not None and b":" in record.key:
        raise ValueError(f"kcat cannot send the key {record.key!r} (contains the delimiter)")
    return (record.key or b"") + b":" + (record.value or b"") + b"\n"


def _from_json(message: dict[str, Any]) -> Rec:
    flat = message.get("headers") or []
    headers = tuple(
        (flat[i], None if flat[i + 1] is None else flat[i + 1].encode()) for i in range(0, len(flat), 2)
    )
    key, payload = message.get("key"), message.get("payload")
    return Rec(
        message["partition"],
        None if key is None else key.encode(),
        None if payload is None else payload.encode(),
        headers,
        message.get("ts"),
        message["offset"],
    )


def _isolation(read_committed: bool) -> list[str]:
    return ["-X", f"isolation.level={'read_committed' if read_committed else 'read_uncommitted'}"]


class _Lines:
    """Collect a stream's lines on a thread (kcat's stdout JSON, its stderr rebalance messages)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))


def _common(ctx: Ctx) -> list[str]:
    """kcat's usual flags and the cell's security properties (librdkafka's own keys) as -X."""
    return [*COMMON, *(arg for key, value in ctx.security.items() for arg in ("-X", f"{key}={value}"))]


class _Member:
    def __init__(self, ctx: Ctx, topic: str, group: str) -> None:
        self.process = subprocess.Popen(
            [
                KCAT,
                "-b",
                ctx.bootstrap,
                "-G",
                group,
                topic,
                "-J",
                "-u",
                *_common(ctx),
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "session.timeout.ms=10000",
                "-X",
                "heartbeat.interval.ms=300",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out = _Lines(self.process.stdout)
        self.err = _Lines(self.process.stderr)

    def assigned(self) -> set[int]:
        current: set[int] = set()
        for line in list(self.err.lines):
            match = _ASSIGNED.search(line)
            if match:
                parts = {int(p) for p in re.findall(r"\[(\d+)\]", match.group(2))}
                current = parts if match.group(1) == "assigned" else set()
        return current

    def records(self) -> list[Rec]:
        return [_from_json(json.loads(line)) for line in list(self.out.lines) if line.startswith("{")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class _OpenTransaction:
    """A transactional kcat run whose records are sent but whose transaction is still open."""

    def __init__(self, ctx: Ctx, topic: str, txn_id: str, records: list[Rec]) -> None:
        partitions = {r.partition for r in records}
        if len(partitions) != 1:
            raise ValueError(f"one kcat run writes one partition, not {sorted(partitions)}")
        self.process = subprocess.Popen(
            [
                KCAT,
                "-b",
                ctx.bootstrap,
                "-P",
                "-t",
                topic,
                "-p",
                str(partitions.pop()),
                "-K:",
                "-Z",
                *_common(ctx),
                "-X",
                f"transactional.id={txn_id}",
                "-X",
                "linger.ms=5",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stderr is not None
        self.err = _Lines(self.process.stderr)
        body = b"".join(_line(r) for r in records)
        self.process.stdin.write(body + b"\n" * (-len(body) % 1024))
        self.process.stdin.flush()

    def end(self, *, abort: bool, timeout: float) -> tuple[int, str]:
        """Abort (SIGINT, then end of input) or commit (end of input); exit status and stderr."""
        assert self.process.stdin is not None
        if abort:
            self.process.send_signal(signal.SIGINT)
        self.process.stdin.close()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self.err.thread.join(5)
        return code, "\n".join(self.err.lines)


class Adapter:
    profile = Profile(
        binary=False, timestamps=False, record_headers=False, empty_bytes=False, null_header_values=False
    )

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        done = subprocess.run(
            [KCAT, "-b", ctx.bootstrap, "-L", "-J", *_common(ctx), "-X", "debug=feature"],
            capture_output=True,
            timeout=ctx.remaining(),
            check=False,
        )
        if done.returncode:
            raise AssertionError(
                f"kcat -L exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}"
            )
        return librdkafka_api_versions(done.stderr.decode(errors="replace").splitlines())

    def metadata(self, ctx: Ctx, topic: str) -> dict:
        listing = json.loads(run_kcat(ctx, "-L", "-J", "-t", topic, *_common(ctx)))
        [described] = listing["topics"]
        return {
            "brokers": {b["id"]: b["name"] for b in listing["brokers"]},
            "partitions": {p["partition"]: p["leader"] for p in described["partitions"]},
        }

    def produce(
        self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> None:
        """One kcat run per partition, its records' headers given once with ``-H``."""
        for partition, recs in by_partition(records).items():
            if len({r.headers for r in recs}) != 1:
                raise ValueError("kcat sends one set of headers per run")
            headers = [
                arg for name, value in recs[0].headers for arg in ("-H", f"{name}={(value or b'').decode()}")
            ]
            run_kcat(
                ctx,
                "-P",
                "-t",
                topic,
                "-p",
                str(partition),
                "-K:",
                "-Z",
                *headers,
                *_common(ctx),
                "-z",
                codec,
                "-X",
                "linger.ms=100",
                "-X",
                "message.timeout.ms=20000",
                "-X",
                f"acks={-1 if acks == 'all' else acks}",
                "-X",
                f"enable.idempotence={str(idempotent).lower()}",
                stdin=b"".join(_line(r) for r in recs),
            )

    def _read_once(self, ctx: Ctx, topic: str, partition: int, read_committed: bool) -> list[Rec]:
        out = run_kcat(
            ctx,
            "-C",
            "-t",
            topic,
            "-p",
            str(partition),
            "-o",
            "beginning",
            "-e",
            "-J",
            "-q",
            *_common(ctx),
            *_isolation(read_committed),
        )
        return [_from_json(json.loads(line)) for line in out.splitlines() if line.strip()]

    def read(
        self,
        ctx: Ctx,
        topic: str,
        partitions: list[int],
        count: int,
        *,
        read_committed: bool = False,
        settle_s: float = 0.0,
    ) -> list[Rec]:
        """kcat reads each partition to its end (-e) and exits; retried until ``count`` records are there."""
        deadline = time.monotonic() + ctx.wait()
        while True:
            got = [r for p in partitions for r in self._read_once(ctx, topic, p, read_committed)]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.2)

    def _visible(self, ctx: Ctx, topic: str, records: list[Rec]) -> None:
        wanted = {r.value for r in records}
        until(
            time.monotonic() + ctx.wait(),
            "the open transaction's records (read_uncommitted)",
            lambda: {r.value for r in self._read_once(ctx, topic, records[0].partition, False)},
            lambda seen: wanted <= seen,
        )

    def txn_produce(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        for records, end in transactions:
            run = _OpenTransaction(ctx, topic, txn_id, records)
            if end == "abort":
                self._visible(ctx, topic, records)
            code, stderr = run.end(abort=end == "abort", timeout=ctx.wait(30))
            expected = "Aborting transaction" if end == "abort" else "Transaction successfully committed"
            if code or expected not in stderr:
                raise AssertionError(f"kcat {end}: exit {code}, stderr: {stderr[-300:]}")

    def fence(self, ctx: Ctx, topic: str, txn_id: str) -> str:
        zombie_records = [Rec(0, None, b"zombie")]
        zombie = _OpenTransaction(ctx, topic, txn_id, zombie_records)
        try:
            self._visible(ctx, topic, zombie_records)
            self.txn_produce(ctx, topic, txn_id, [([Rec(0, None, b"winner")], "commit")])
        finally:
            code, stderr = zombie.end(abort=False, timeout=ctx.wait(30))
        if code == 0:
            raise AssertionError(f"the fenced kcat committed: {stderr[-300:]}")
        return [line for line in stderr.splitlines() if line.strip()][-1]

    def group_rebalance(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec]) -> dict:
        from ..fixtures import produce_plain  # noqa: PLC0415

        deadline = time.monotonic() + ctx.remaining()
        produce_plain(ctx.bootstrap, topic, phase1)
        members = {"a": _Member(ctx, topic, group)}
        try:
            values1 = {r.value for r in phase1}
            until(
                deadline,
                "member A to read the first records",
                lambda: {r.value for r in members["a"].records()},
                lambda seen: values1 <= seen,
            )
            a_first = sorted(members["a"].assigned())
            members["b"] = _Member(ctx, topic, group)
            until(
                deadline,
                "the rebalance to give B partitions",
                lambda: (members["a"].assigned(), members["b"].assigned()),
                lambda ab: bool(ab[0]) and bool(ab[1]) and ab[0] | ab[1] == {0, 1, 2} and not ab[0] & ab[1],
            )
            after = {w: sorted(m.assigned()) for w, m in members.items()}
            produce_plain(ctx.bootstrap, topic, phase2)
            values2 = {r.value for r in phase2}
            until(
                deadline,
                "the later records",
                lambda: {r.value for m in members.values() for r in m.records()},
                lambda seen: values2 <= seen,
            )
            time.sleep(0.3)
        finally:
            for member in members.values():
                member.stop()
        return {
            "a_first": a_first,
            "a_after": after["a"],
            "b_after": after["b"],
            "a_records": members["a"].records(),
            "b_records": members["b"].records(),
        }

    def commit_fetch(self, ctx: Ctx, topic: str, group: str) -> dict:
        group_args = [
            "-G",
            group,
            topic,
            "-J",
            "-q",
            *_common(ctx),
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "enable.auto.commit=true",
        ]
        first = run_kcat(ctx, *group_args, "-c", "4")  # commits what it consumed when it closes
        resumed = run_kcat(ctx, *group_args, "-e")  # starts from the committed offset
        parse = [_from_json(json.loads(line)) for line in first.splitlines() if line.strip()]
        return {
            "consumed": parse,
            "committed": None,
            "resumed": [_from_json(json.loads(line)) for line in resumed.splitlines() if line.strip()],
            "how": "-G with auto-commit, then a second -G run",
        }

    def offsets_for_times(
        self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]
    ) -> dict[int, int | None]:
        out = {}
        for ts in timestamps:
            answer = json.loads(run_kcat(ctx, "-Q", "-J", "-t", f"{topic}:{partition}:{ts}", *_common(ctx)))
            offset = answer[topic][str(partition)]["offset"]
            out[ts] = offset if offset >= 0 else None
        return out


def version() -> dict[str, str]:
    done = subprocess.run([KCAT, "-V"], capture_output=True, timeout=10, check=False)
    text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    found = re.search(r"Version (\S+)", text)
    info = {"version": found.group(1) if found else "?"}
    librdkafka = re.search(r"librdkafka (\S+)", text)
    if librdkafka:
        info["librdkafka"] = librdkafka.group(1)
    if shutil.which("dpkg-query"):
        package = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "kcat"], capture_output=True, timeout=10, check=False
        )
        if package.returncode == 0:
            info["debian"] = package.stdout.decode().strip()
    return info


_NO_ADMIN = "kcat has no admin commands (it lists metadata only)"
_CONSUMER_ONLY = (
    "kcat has no consume-transform-produce mode: it cannot send consumer offsets to a transaction"
)

CLIENT = Client(
    name="kcat",
    adapter=Adapter(),
    version=version,
    not_offered={
        "send-offsets-txn": _CONSUMER_ONLY,
        "send-offsets-txn-kip848": _CONSUMER_ONLY,
        "group-rebalance-kip848": "Debian's kcat 1.7.1 links librdkafka 2.0.2, older than group.protocol=consumer (KIP-848)",
        "group-upgrade-kip848": "Debian's kcat 1.7.1 links librdkafka 2.0.2, older than group.protocol=consumer (KIP-848): "
                                "none of its members can upgrade a group",
        "admin-topics": _NO_ADMIN,
        "admin-configs": _NO_ADMIN,
        "admin-replica-assignment": _NO_ADMIN,
        "config-sources-41": _NO_ADMIN,
        "list-config-resources": _NO_ADMIN,
        "list-describe-txn": _NO_ADMIN,
        "share-group": "Debian's kcat 1.7.1 (librdkafka 2.0.2) has no share consumer (KIP-932)",
    },
)
