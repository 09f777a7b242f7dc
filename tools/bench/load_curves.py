"""python -m tools.bench.load_curves: how cost grows with connections, groups and transactional producers.

    python -m tools.bench.load_curves --peer tansu
    python -m tools.bench.load_curves --connections 10,1000 --groups '' --producers ''

The three curves of issue #22's "cost curves" that curves.py (partitions, message size) leaves out,
each point on a fresh broker of each kind, our broker and the peers in the same run:

* connections (10, 1,000, 5,000): N raw connections each make one ApiVersions and one Metadata
  call and stay open; with them open, one confluent-kafka producer's msg/s, the Metadata p50/p99
  of one more connection, the broker's RSS and CPU. Then the "active" variant: ``--active`` of
  those N connections each send ApiVersions/Metadata round trips in a closed loop (two threads
  with selectors) while the same probe runs again. The clients are raw sockets, so the figures
  are the broker's cost of holding and serving connections, not a client library's.
* consumer groups (1, 100, 1,000): G groups of one member each, joined all at once over the
  classic protocol on our codec (JoinGroup with MEMBER_ID_REQUIRED, then SyncGroup; one
  connection per member, one selector, heartbeats from then on): time to join all; then OffsetCommit round trips for the
  groups in turn from 16 connections (16 in flight whatever G is, frames built before the
  clock starts); then DescribeGroups of one group and ListGroups round trips.
* transactional producers (1, 16, 64): workloads.concurrent_transactions with P producers, each
  on its own partition: txn/s, commit p50/p99, broker CPU per transaction.

Every point has a budget (``--budget`` seconds); a point over it, or one a broker cannot run, is
recorded with its error and left out of the chart. Members use Kafka's minimum session timeout
(6 s) and heartbeat every 2 s: both brokers then hold a new group's first join for 3 s (ours and
Kafka: group.initial.rebalance.delay.ms; Tansu: half the session timeout), so join times start at
3 s. Prints a table, writes JSON (``--json``) and three PNGs into ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from rivven_kproto.codec.messages.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from rivven_kproto.codec.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from rivven_kproto.codec.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from rivven_kproto.codec.schema import Request
from rivven_kproto.net.protocol import decode_response
from rivven_kproto.server.connection_limits import raise_descriptor_limit

from . import brokers, procstats
from . import workloads as w
from .curves import chart, metadata_latency, on_fresh_broker

log = logging.getLogger("tools.bench.load_curves")

CONNECTIONS = (10, 1_000, 5_000)
GROUPS = (1, 100, 1_000)
PRODUCERS = (1, 16, 64)
ACTIVE = 100  # connections in the active variant's closed loop (at most N)
ACTIVE_THREADS = 2
COMMITTERS = 16  # OffsetCommit requests in flight, whatever the number of groups
JOIN_VERSION, SYNC_VERSION, COMMIT_VERSION, DESCRIBE_VERSION, LIST_VERSION = 5, 3, 7, 4, 3
# Kafka's minimum session timeout (group.min.session.timeout.ms); Tansu holds a join for half of
# it, as long as ours and Kafka hold a new group's first join (group.initial.rebalance.delay.ms).
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_S = 2.0  # a third of the session, as clients do
HEARTBEAT_VERSION = 3
_SIZE = struct.Struct(">i")


def frame(request: Request, version: int, correlation: int = 1, client_id: str = "load-curves") -> bytes:
    header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                           correlation_id=correlation, client_id=client_id)
    return encode_request(header, request)


def percentiles(samples: list[float], prefix: str) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {}
    return {f"{prefix}_p50_ms": ordered[len(ordered) // 2],
            f"{prefix}_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


def broker_pid(bootstrap: str) -> int:
    """The pid of the child process listening on ``bootstrap``'s port (on_fresh_broker hands the
    point its address only): the listening socket's inode from /proc/net/tcp, then whose fd it is."""
    port = int(bootstrap.rsplit(":", 1)[1])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            for fd in (stat.parent / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(stat.parent.name)
        except OSError:
            continue  # exited meanwhile
    raise RuntimeError(f"no child process listens on {bootstrap}")


class Frames:
    """Length-prefixed response frames arriving on a non-blocking socket, in pieces."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def read(self) -> list[bytes]:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the broker closed a connection")
        self.buffer += chunk
        frames = []
        while len(self.buffer) >= 4:
            (size,) = _SIZE.unpack_from(self.buffer)
            if len(self.buffer) < 4 + size:
                break
            frames.append(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]
        return frames


def _check_deadline(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{what}: over the point's budget")


# -- connections ------------------------------------------------------------------------------

def open_connections(bootstrap: str, count: int, deadline: float) -> list[socket.socket]:
    """``count`` connections, each sending ApiVersions and Metadata (all topics) once; returned
    once every answer is in (read with one selector, so 5,000 cost no threads)."""
    host, port = bootstrap.rsplit(":", 1)
    hello = (frame(ApiVersionsRequest(client_software_name="load-curves", client_software_version="1"), 3, 1)
             + w.metadata_frame(None, 2, "load-curves"))
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            _check_deadline(deadline, f"opening {count} connections")
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.sendall(hello)
            sock.setblocking(False)
            sockets.append(sock)
        waiting = {sock: 2 for sock in sockets}
        readers = {sock: Frames(sock) for sock in sockets}
        with selectors.DefaultSelector() as selector:
            for sock in sockets:
                selector.register(sock, selectors.EVENT_READ)
            while waiting:
                _check_deadline(deadline, f"{len(waiting)} of {count} connections unanswered")
                for key, _ in selector.select(1.0):
                    sock = key.fileobj  # type: ignore[assignment]
                    waiting[sock] -= len(readers[sock].read())
                    if waiting[sock] <= 0:
                        del waiting[sock]
                        selector.unregister(sock)
        return sockets
    except BaseException:
        for sock in sockets:
            sock.close()
        raise


class ActiveLoad:
    """``connections`` split over a few threads, each connection sending ApiVersions and Metadata
    round trips in turn, one at a time, until stopped (or the deadline)."""

    def __init__(self, connections: list[socket.socket], deadline: float, threads: int = ACTIVE_THREADS) -> None:
        self.requests = [frame(ApiVersionsRequest(client_software_name="load-curves", client_software_version="1"), 3, 7),
                         w.metadata_frame(None, 8, "load-curves")]
        self.deadline = deadline
        self.stop = threading.Event()
        self.latencies: list[list[float]] = [[] for _ in range(threads)]
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(connections[i::threads], self.latencies[i]), daemon=True)
                        for i in range(threads) if connections[i::threads]]

    def _run(self, connections: list[socket.socket], latencies: list[float]) -> None:
        try:
            sent: dict[socket.socket, tuple[float, int]] = {}
            readers = {sock: Frames(sock) for sock in connections}
            with selectors.DefaultSelector() as selector:
                for n, sock in enumerate(connections):
                    selector.register(sock, selectors.EVENT_READ)
                    sock.send(self.requests[n % 2])  # a few dozen bytes: a fresh socket's buffer takes them
                    sent[sock] = (time.perf_counter(), n % 2)
                while not self.stop.is_set() and time.monotonic() < self.deadline:
                    for key, _ in selector.select(0.2):
                        sock = key.fileobj  # type: ignore[assignment]
                        if readers[sock].read():
                            started, which = sent[sock]
                            now = time.perf_counter()
                            latencies.append((now - started) * 1000)
                            sock.send(self.requests[1 - which])
                            sent[sock] = (now, 1 - which)
        except BaseException as exc:  # noqa: BLE001 - reported by stop_and_report
            self.errors.append(exc)

    def __enter__(self) -> ActiveLoad:
        self.started = time.perf_counter()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)
        self.seconds = time.perf_counter() - self.started

    def figures(self) -> dict[str, float]:
        if self.errors:
            raise self.errors[0]
        samples = [x for mine in self.latencies for x in mine]
        return {"active_round_trips_per_s": len(samples) / self.seconds, **percentiles(samples, "active")}


def _probe(bootstrap: str, pid: int, topic: str, messages: int, rounds: int) -> dict[str, Any]:
    """One producer's msg/s and one connection's Metadata latency, with the broker's CPU during them."""
    before = procstats.usage(pid).cpu_s
    produced = w.produce(bootstrap, topic, messages, 1)
    point: dict[str, Any] = {"produce_msgs_per_s": produced.msgs_per_s}
    point.update(metadata_latency(bootstrap, topic, rounds))
    point["broker_cpu_s"] = procstats.usage(pid).cpu_s - before
    return point


def connections_point(bootstrap: str, connections: int, active: int, messages: int, rounds: int,
                      idle_seconds: float, budget_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + budget_s
    pid = broker_pid(bootstrap)
    rss_before = procstats.usage(pid).rss_mib
    started = time.perf_counter()
    sockets = open_connections(bootstrap, connections, deadline)
    try:
        opened = time.perf_counter() - started
        cpu_before = procstats.usage(pid).cpu_s
        time.sleep(idle_seconds)  # what holding them costs when nobody speaks
        held = procstats.usage(pid)
        point: dict[str, Any] = {
            "open_s": opened, "rss_before_mib": rss_before, "rss_mib": held.rss_mib,
            "rss_per_connection_kib": (held.rss_mib - rss_before) * 1024 / connections,
            "idle_cpu_percent": (held.cpu_s - cpu_before) / idle_seconds * 100,
        }
        # active_round_trips_per_s: the idle variant's loop makes none (and the charts keep a
        # broker's colours when every series has a value in every panel).
        point["idle"] = {**_probe(bootstrap, pid, f"curve-c{connections}-idle", messages, rounds),
                         "rss_mib": held.rss_mib, "active_round_trips_per_s": 0.0}
        _check_deadline(deadline, "idle probe")
        with ActiveLoad(sockets[:active], deadline) as load:
            time.sleep(0.3)  # the loop is running before the probe starts
            point["active"] = _probe(bootstrap, pid, f"curve-c{connections}-active", messages, rounds)
            point["active"]["rss_mib"] = procstats.usage(pid).rss_mib
        point["active"].update(load.figures(), active_connections=min(active, connections))
        _check_deadline(deadline, "active probe")
        return point
    finally:
        for sock in sockets:
            sock.close()


# -- consumer groups -------------------------------------------------------------------------

def _consumer_metadata(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: [topic], no user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def _consumer_assignment(topic: str) -> bytes:
    """ConsumerProtocolAssignment v0: topic -> [0], no user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">iii", 1, 0, -1)


@dataclasses.dataclass
class Member:
    group: str
    sock: socket.socket
    reader: Frames
    started: float = 0.0
    member_id: str = ""
    generation: int = -1
    joined_ms: float = 0.0
    beating: bool = False  # a Heartbeat is in flight


class Members:
    """One member per group, each on its own connection, driven by one thread with a selector:
    all join at once (the classic protocol: JoinGroup, again with the id MEMBER_ID_REQUIRED handed
    out, SyncGroup with the leader's assignment), then heartbeat every HEARTBEAT_S, as a consumer
    does, so the sessions hold while the commits and describes run."""

    def __init__(self, bootstrap: str, groups: list[str], topic: str, deadline: float) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.topic, self.deadline = topic, deadline
        self.protocols = [JoinGroupRequestProtocol(name="range", metadata=_consumer_metadata(topic))]
        self.members: list[Member] = []
        self.joined = threading.Event()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.heartbeats = 0
        try:
            for group in groups:
                _check_deadline(deadline, f"connecting {len(groups)} members")
                sock = socket.create_connection((host, int(port)), timeout=30)
                self.members.append(Member(group, sock, Frames(sock)))
        except BaseException:
            self.close()
            raise
        self.thread = threading.Thread(target=self._run, daemon=True)

    def close(self) -> None:
        for member in self.members:
            member.sock.close()

    def _join(self, member: Member) -> bytes:
        return frame(JoinGroupRequest(group_id=member.group, session_timeout_ms=SESSION_TIMEOUT_MS,
                                      rebalance_timeout_ms=SESSION_TIMEOUT_MS, member_id=member.member_id,
                                      group_instance_id=None, protocol_type="consumer", protocols=self.protocols),
                     JOIN_VERSION)

    def _answer(self, member: Member, answer: bytes) -> bool:
        """Take one response; True once the member has synced."""
        if member.joined_ms:
            beat = decode_response(answer, HeartbeatRequest.API_KEY, HEARTBEAT_VERSION)
            assert isinstance(beat, HeartbeatResponse)
            if beat.error_code:
                raise RuntimeError(f"Heartbeat {member.group}: error {beat.error_code}")
            member.beating = False
            self.heartbeats += 1
            return True
        if member.generation < 0:
            joined = decode_response(answer, JoinGroupRequest.API_KEY, JOIN_VERSION)
            assert isinstance(joined, JoinGroupResponse)
            member.member_id = joined.member_id
            if joined.error_code == Errors.MEMBER_ID_REQUIRED:
                member.sock.send(self._join(member))
                return False
            if joined.error_code:
                raise RuntimeError(f"JoinGroup {member.group}: error {joined.error_code}")
            member.generation = joined.generation_id
            member.sock.send(frame(SyncGroupRequest(
                group_id=member.group, generation_id=member.generation, member_id=member.member_id,
                group_instance_id=None, assignments=[SyncGroupRequestAssignment(
                    member_id=member.member_id, assignment=_consumer_assignment(self.topic))]), SYNC_VERSION))
            return False
        synced = decode_response(answer, SyncGroupRequest.API_KEY, SYNC_VERSION)
        assert isinstance(synced, SyncGroupResponse)
        if synced.error_code:
            raise RuntimeError(f"SyncGroup {member.group}: error {synced.error_code}")
        member.joined_ms = (time.perf_counter() - member.started) * 1000
        return True

    def _run(self) -> None:
        try:
            waiting = len(self.members)
            with selectors.DefaultSelector() as selector:
                for member in self.members:
                    member.started = time.perf_counter()
                    member.sock.sendall(self._join(member))
                    member.sock.setblocking(False)
                    selector.register(member.sock, selectors.EVENT_READ, member)
                next_beat = time.monotonic() + HEARTBEAT_S
                while not self.stop.is_set():
                    if not self.joined.is_set():
                        _check_deadline(self.deadline, f"{waiting} of {len(self.members)} groups not joined")
                    if time.monotonic() >= next_beat:
                        next_beat += HEARTBEAT_S
                        for member in self.members:
                            if member.joined_ms and not member.beating:
                                member.beating = True
                                member.sock.send(frame(HeartbeatRequest(
                                    group_id=member.group, generation_id=member.generation,
                                    member_id=member.member_id, group_instance_id=None), HEARTBEAT_VERSION))
                    for key, _ in selector.select(0.1):
                        member = key.data
                        for answer in member.reader.read():
                            synced_before = bool(member.joined_ms)
                            if self._answer(member, answer) and not synced_before:
                                waiting -= 1
                                if not waiting:
                                    self.joined.set()
        except BaseException as exc:  # noqa: BLE001 - reported by check
            self.errors.append(exc)
            self.joined.set()

    def check(self) -> None:
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> Members:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.close()


def commit_offsets(bootstrap: str, members: list[Member], topic: str, commits: int,
                   deadline: float) -> dict[str, float]:
    """``commits`` OffsetCommit round trips for the groups in turn, COMMITTERS in flight on as
    many connections (a group's member id is not bound to a connection); frames built first."""
    frames = [frame(OffsetCommitRequest(
        group_id=m.group, generation_id_or_member_epoch=m.generation, member_id=m.member_id, group_instance_id=None,
        topics=[OffsetCommitRequestTopic(name=topic, partitions=[OffsetCommitRequestPartition(
            partition_index=0, committed_offset=i, committed_metadata=None)])]), COMMIT_VERSION, i)
        for i, m in ((i, members[i % len(members)]) for i in range(commits))]
    host, port = bootstrap.rsplit(":", 1)
    sockets = [socket.create_connection((host, int(port)), timeout=30) for _ in range(min(COMMITTERS, commits))]
    answers: list[bytes] = []
    latencies: list[float] = []
    try:
        readers = {sock: Frames(sock) for sock in sockets}
        sent: dict[socket.socket, float] = {}
        next_frame = 0
        start = time.perf_counter()
        with selectors.DefaultSelector() as selector:
            for sock in sockets:
                sock.setblocking(False)
                selector.register(sock, selectors.EVENT_READ)
                sock.send(frames[next_frame])
                sent[sock], next_frame = time.perf_counter(), next_frame + 1
            while len(answers) < commits:
                _check_deadline(deadline, f"{len(answers)} of {commits} commits")
                for key, _ in selector.select(1.0):
                    sock = key.fileobj  # type: ignore[assignment]
                    got = readers[sock].read()
                    if not got:
                        continue
                    now = time.perf_counter()
                    latencies.append((now - sent[sock]) * 1000)
                    answers.extend(got)
                    if next_frame < commits:
                        sock.send(frames[next_frame])
                        sent[sock], next_frame = now, next_frame + 1
        seconds = time.perf_counter() - start
    finally:
        for sock in sockets:
            sock.close()
    for answer in answers:
        response = decode_response(answer, OffsetCommitRequest.API_KEY, COMMIT_VERSION)
        assert isinstance(response, OffsetCommitResponse)
        errors = {p.error_code for t in response.topics for p in t.partitions} - {0}
        if errors:
            raise RuntimeError(f"OffsetCommit answered errors {errors}")
    return {"commits_per_s": commits / seconds, **percentiles(latencies, "commit")}


def round_trips(bootstrap: str, frames: Iterable[bytes], check: Callable[[bytes], None]) -> list[float]:
    """One connection, one request at a time; ``check`` the first answer."""
    host, port = bootstrap.rsplit(":", 1)
    samples: list[float] = []
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        for request in frames:
            started = time.perf_counter()
            sock.sendall(request)
            (length,) = _SIZE.unpack(w._read_exactly(sock, 4))
            answer = w._read_exactly(sock, length)
            samples.append((time.perf_counter() - started) * 1000)
            if len(samples) == 1:
                check(answer)
    return samples


def groups_point(bootstrap: str, groups: int, commits: int, rounds: int, budget_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + budget_s
    pid = broker_pid(bootstrap)
    topic = "curve-groups"
    w.create_topic(bootstrap, topic, 1)
    names = [f"curve-group-{i}" for i in range(groups)]
    before = procstats.usage(pid)
    started = time.perf_counter()
    with Members(bootstrap, names, topic, deadline) as driver:
        driver.joined.wait(max(0.0, deadline - time.monotonic()))
        driver.check()
        _check_deadline(deadline, "joining")
        members = driver.members
        joined = procstats.usage(pid)
        point: dict[str, Any] = {
            "join_all_s": time.perf_counter() - started, **percentiles([m.joined_ms for m in members], "join"),
            "join_cpu_s": joined.cpu_s - before.cpu_s, "rss_mib": joined.rss_mib,
            "rss_per_group_kib": (joined.rss_mib - before.rss_mib) * 1024 / groups,
        }
        point.update(commit_offsets(bootstrap, members, topic, commits, deadline))
        point["commit_cpu_s"] = procstats.usage(pid).cpu_s - joined.cpu_s
        _check_deadline(deadline, "commits")

        def described(answer: bytes) -> None:
            response = decode_response(answer, DescribeGroupsRequest.API_KEY, DESCRIBE_VERSION)
            assert isinstance(response, DescribeGroupsResponse)
            group = response.groups[0]
            if group.error_code or group.group_state != "Stable" or len(group.members) != 1:
                raise RuntimeError(f"DescribeGroups {group.group_id}: {group.error_code} {group.group_state}")

        def listed(answer: bytes) -> None:
            response = decode_response(answer, ListGroupsRequest.API_KEY, LIST_VERSION)
            assert isinstance(response, ListGroupsResponse)
            found = {g.group_id for g in response.groups}
            if response.error_code or not set(names) <= found:
                raise RuntimeError(f"ListGroups: error {response.error_code}, {len(found & set(names))} of {groups}")

        point.update(percentiles(round_trips(bootstrap, (
            frame(DescribeGroupsRequest(groups=[names[i % groups]], include_authorized_operations=False),
                  DESCRIBE_VERSION, i) for i in range(rounds)), described), "describe"))
        point.update(percentiles(round_trips(bootstrap, (
            frame(ListGroupsRequest(), LIST_VERSION, i) for i in range(max(rounds // 5, 2))), listed), "list"))
        _check_deadline(deadline, "describe")
        driver.check()  # every heartbeat answered without an error: the sessions held throughout
        point["heartbeats"] = driver.heartbeats
        return point


# -- transactional producers ------------------------------------------------------------------

def producers_point(bootstrap: str, producers: int, transactions: int) -> dict[str, Any]:
    pid = broker_pid(bootstrap)
    before = procstats.usage(pid).cpu_s
    figures = w.concurrent_transactions(bootstrap, f"curve-t{producers}", max(transactions, producers),
                                        producers=producers, partitions=producers)
    cpu = procstats.usage(pid).cpu_s - before
    done = figures.messages // 10
    return {"txn_per_s": figures.extra["txn_per_s"], "transactions": done,
            "commit_p50_ms": figures.percentile(0.5), "commit_p99_ms": figures.percentile(0.99),
            "broker_cpu_s": cpu, "broker_cpu_ms_per_txn": cpu / done * 1000}


# -- running the points ---------------------------------------------------------------------

def within(budget_s: float, run: Callable[[str], dict[str, Any]], bootstrap: str) -> dict[str, Any]:
    """``run`` in a thread, given up (TimeoutError, so recorded as the point's error) after
    ``budget_s`` plus a grace for the point's own deadline checks; a late thread then fails
    against the stopped broker."""
    outcome: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(run(bootstrap))
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            failure.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(budget_s + 30)
    if failure:
        raise failure[0]
    if not outcome:
        raise TimeoutError(f"over the budget of {budget_s:.0f} s")
    return outcome[0]


def measure(target: brokers.Target, run: Callable[[str], dict[str, Any]], budget_s: float) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    point = on_fresh_broker(target, partial(within, budget_s, run))
    point["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # 1-min, before and after
    return point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.load_curves", description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="append", default=[],
                        help="'tansu', 'postgresql' or a command line with {port} (see python -m tools.bench); repeatable")
    parser.add_argument("--connections", default=",".join(map(str, CONNECTIONS)))
    parser.add_argument("--groups", default=",".join(map(str, GROUPS)))
    parser.add_argument("--producers", default=",".join(map(str, PRODUCERS)))
    parser.add_argument("--active", type=int, default=ACTIVE, help="connections in the active variant's loop")
    parser.add_argument("--messages", type=int, default=100_000, help="per producer probe")
    parser.add_argument("--metadata-rounds", type=int, default=200, help="Metadata (and DescribeGroups) round trips")
    parser.add_argument("--idle-seconds", type=float, default=2.0, help="broker CPU sampled with the connections idle")
    parser.add_argument("--commits", type=int, default=3_000, help="OffsetCommit round trips per groups point")
    parser.add_argument("--transactions", type=int, default=960, help="transactions per producers point, in all")
    parser.add_argument("--budget", type=float, default=180.0, help="seconds per point")
    parser.add_argument("--out", type=Path, default=Path("tools/bench"))
    parser.add_argument("--json", type=Path, default=Path("load-curves-results.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    descriptors = raise_descriptor_limit()  # before any broker starts: they inherit it
    targets = [brokers.ours(), *(brokers.peer(spec) for spec in args.peer)]
    xs = {curve: [int(x) for x in getattr(args, curve).split(",") if x]
          for curve in ("connections", "groups", "producers")}
    if max(xs["connections"], default=0) * 2 + 200 > descriptors:
        raise SystemExit(f"{max(xs['connections'])} connections need more than the {descriptors} open files allowed")
    runs: dict[str, Callable[[int], Callable[[str], dict[str, Any]]]] = {
        "connections": lambda n: partial(connections_point, connections=n, active=args.active, messages=args.messages,
                                         rounds=args.metadata_rounds, idle_seconds=args.idle_seconds,
                                         budget_s=args.budget),
        "groups": lambda n: partial(groups_point, groups=n, commits=args.commits, rounds=args.metadata_rounds,
                                    budget_s=args.budget),
        "producers": lambda n: partial(producers_point, producers=n, transactions=args.transactions),
    }
    results: dict[str, Any] = {"run": {
        "date": datetime.date.today().isoformat(), "argv": sys.argv[1:] if argv is None else argv,
        "cpus": os.cpu_count(), "open_files": descriptors, "load_average_at_start": os.getloadavg(),
    }, "connections": {}, "groups": {}, "producers": {}}
    for curve, counts in xs.items():
        for count in counts:
            for target in targets:
                point = measure(target, runs[curve](count), args.budget)
                results[curve].setdefault(target.name, {})[str(count)] = point
                log.info("%s %s=%d: %s", target.name, curve, count, point)
    args.json.write_text(json.dumps(results, indent=1))
    write_charts(results, xs, args.out)
    print_table(results, xs)
    return 0


C_METRICS = [("produce_msgs_per_s", "one producer alongside, msg/s"), ("metadata_p99_ms", "Metadata p99, ms"),
             ("rss_mib", "broker RSS (idle: after opening), MiB"), ("active_round_trips_per_s", "active loop, round trips/s")]
G_METRICS = [("join_all_s", "join all groups, s"), ("commits_per_s", "OffsetCommit/s (16 in flight)"),
             ("commit_p99_ms", "OffsetCommit p99, ms"), ("describe_p99_ms", "DescribeGroups p99, ms"),
             ("list_p99_ms", "ListGroups p99, ms")]
P_METRICS = [("txn_per_s", "transactions/s"), ("commit_p99_ms", "commit p99, ms"),
             ("broker_cpu_ms_per_txn", "broker CPU per transaction, ms")]


def _value(point: dict[str, Any], key: str) -> float | None:
    value = point.get(key)
    return float(value) if isinstance(value, int | float) and "error" not in point else None


def write_charts(results: dict[str, Any], xs: dict[str, list[int]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if xs["connections"]:
        # Two lines per broker: the probe with the others idle, and with --active of them busy.
        series: dict[str, dict[str, list[float | None]]] = {}
        for broker, points in results["connections"].items():
            for variant in ("idle", "active"):
                series[f"{broker} {variant}"] = {key: [
                    _value({**points[str(x)], **points[str(x)].get(variant, {})}, key) for x in xs["connections"]]
                    for key, _ in C_METRICS}
        chart(out / "curve-connections.png", "Cost against open connections", "connections",
              xs["connections"], series, C_METRICS)
    for curve, name, title, xlabel, metrics in (
            ("groups", "curve-groups.png", "Cost against consumer groups", "groups (one member each)", G_METRICS),
            ("producers", "curve-txn-producers.png", "Cost against concurrent transactional producers",
             "transactional producers", P_METRICS)):
        if xs[curve]:
            chart(out / name, title, xlabel, xs[curve], {
                broker: {key: [_value(points[str(x)], key) for x in xs[curve]] for key, _ in metrics}
                for broker, points in results[curve].items()}, metrics)


def print_table(results: dict[str, Any], xs: dict[str, list[int]]) -> None:
    keys = {"connections": ["open_s", "rss_mib", "rss_per_connection_kib", "idle_cpu_percent"],
            "groups": [k for k, _ in G_METRICS] + ["join_p99_ms", "describe_p50_ms", "rss_per_group_kib"],
            "producers": [k for k, _ in P_METRICS] + ["commit_p50_ms"]}
    for curve, counts in xs.items():
        for broker, points in results[curve].items():
            for x in counts:
                point = points.get(str(x), {})
                rows = [("", point)]
                if curve == "connections":
                    rows += [(variant, point[variant]) for variant in ("idle", "active") if variant in point]
                for variant, figures in rows:
                    cells = [f"{k}={v:.2f}" for k, v in figures.items()
                             if isinstance(v, float | int) and (variant or k in keys[curve])]
                    print(f"{curve:11} {broker:14} {x:>6} {variant:6} {' '.join(cells) or point.get('error', '')}")


if __name__ == "__main__":
    sys.exit(main())
