"""The cluster nemesis: seeded faults against a :class:`~.cluster.Cluster`, injected at workload steps.

At every step the workload calls :meth:`Nemesis.step`; each fault kind fires with its chance (from
the nemesis's own generator, seeded from the run's seed, so the same seed gives the same schedule),
and with ``every_kind`` each enabled kind is also forced once at a step drawn in the first third of
the run. A fault starts at once and its recovery (restarting a killed broker, SIGCONT after a
pause, PostgreSQL coming back) runs on a thread of its own, so faults overlap: a broker may be
killed while another is paused. At most ``size - 1`` brokers are down or paused at a time, and one
database fault runs at a time. Every fault and its end go into the history's fault log with the
time since the run began.

Kill targets are sometimes chosen by role, as the cluster itself answers (Metadata, FindCoordinator):
the controller, the coordinator of a transactional id or a group, or a partition's leader.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from .cluster import Cluster
from .history import Fault, History

log = logging.getLogger(__name__)

SESSION_TIMEOUT_S = 9.0  # the brokers' session (Kafka's broker.session.timeout.ms): a longer pause loses it
RECOVERY_JOIN_S = 180.0

# kind -> the history's fault counter
COUNTERS = {
    "kill": "broker_kills",
    "pause": "broker_pauses",
    "long_pause": "broker_long_pauses",
    "cut": "connection_cuts",
    "postgres_restart": "postgres_restarts",
    "failover": "postgres_failovers",
}
ROLES = ("any", "controller", "transaction_coordinator", "group_coordinator", "leader")


@dataclass
class Rates:
    """Each kind's chance at a step (failover: once at most, and only with a standby)."""

    kill: float = 0.03
    pause: float = 0.02
    long_pause: float = 0.004
    cut: float = 0.03
    postgres_restart: float = 0.01
    failover: float = 0.005
    every_kind: bool = False  # force each enabled kind once, in the first third of the steps
    steps: int = 200  # the run's length in steps (where forced faults are drawn)

    def enabled(self, standby: bool) -> list[str]:
        return [kind for kind in COUNTERS if getattr(self, kind) > 0 and (kind != "failover" or standby)]


@dataclass
class Targets:
    """What the workload's clients use, so faults can aim at their coordinators and leaders."""

    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    transactional_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Draw:
    """One fault of the schedule: its kind, a number in [0, 1) that picks its target and mode, and
    how long the broker stays down or paused."""

    step: int
    kind: str
    choice: float
    downtime_s: float
    forced: bool = False  # by ``every_kind``: when it cannot be injected, it is tried again next step


def schedule_steps(transactions: int, duration_s: float | None) -> int:
    """How many steps a run is planned for (the forced faults are drawn in the first third):
    two per transaction, or, when --duration ends the run first, about two per second (what a
    cluster run reaches; a 180 s run capped at 5,000 transactions never reached some forced
    faults when they were drawn among 10,000 steps)."""
    if duration_s is None:
        return 2 * transactions
    return min(2 * transactions, max(2, int(2 * duration_s)))


class Schedule:
    """The seed's faults, step by step: pure (no cluster), so a replay gets the same one."""

    def __init__(self, rates: Rates, seed: int, enabled: list[str]) -> None:
        self.rates, self.enabled = rates, enabled
        self.rng = random.Random(f"nemesis-{seed}")
        self.forced: dict[int, list[str]] = {}
        if rates.every_kind:
            for kind in enabled:
                self.forced.setdefault(self.rng.randrange(1, max(2, rates.steps // 3)), []).append(kind)
        self.step = 0

    def next(self) -> list[Draw]:
        """The next step's faults: every kind's chance is drawn (enabled or not), then each fault's
        own numbers, so the schedule does not depend on what the cluster answered."""
        self.step += 1
        kinds = [(kind, False) for kind in COUNTERS if self.rng.random() < getattr(self.rates, kind)]
        kinds += [(kind, True) for kind in self.forced.pop(self.step, [])]
        draws = []
        for kind, forced in kinds:
            choice, downtime = self.rng.random(), self.rng.uniform(0.2, 3.0)
            if kind == "long_pause":
                downtime = SESSION_TIMEOUT_S + self.rng.uniform(1.0, 4.0)
            if kind in self.enabled:
                draws.append(Draw(self.step, kind, choice, downtime, forced))
        return draws

    def again(self, draw: Draw) -> None:
        """A forced fault that could not be injected: at the next step."""
        self.forced.setdefault(self.step + 1, []).append(draw.kind)


class Nemesis:
    def __init__(self, cluster: Cluster, rates: Rates, seed: int, report: Callable[[str], None] | None = None) -> None:
        """``report``: told every fault as it happens (a line of text)."""
        self.cluster, self.rates, self.report = cluster, rates, report
        cluster.on_exit = self._exited
        self.history = History(seed=seed, bootstrap=cluster.bootstrap)  # until the workload's is attached
        self.schedule = Schedule(rates, seed, rates.enabled(cluster.with_standby))
        self.targets = Targets()
        self._lock = threading.RLock()  # (recording takes it too, also while it is held)
        self._faulted: set[int] = set()  # brokers down or paused now
        self._database_busy = False
        self._recoveries: list[threading.Thread] = []
        self.step_number = 0

    def attach(self, history: History) -> None:
        """Record into ``history`` (the workload's, made when the run starts)."""
        self.history = history
        for counter in COUNTERS.values():
            history.faults.setdefault(counter, 0)

    # -- the schedule ---------------------------------------------------------------------------------

    def step(self) -> None:
        """One workload step: inject the schedule's faults for it (those possible now)."""
        for draw in self.schedule.next():
            self.step_number = draw.step
            done_already = draw.kind == "failover" and self.cluster.database is not None and self.cluster.database.failed_over
            if not self._inject(draw) and draw.forced and not done_already:
                self.schedule.again(draw)
        self.step_number = self.schedule.step

    def owes_forced(self) -> bool:
        """With ``every_kind``, an enabled kind has not happened yet (the run goes on past its
        duration until it has: its forced step, or the retries of it, are still to come)."""
        return self.rates.every_kind and any(
            not self.history.faults.get(COUNTERS[kind]) for kind in self.schedule.enabled)

    def _inject(self, draw: Draw) -> bool:
        """Whether the fault was injected (not skipped)."""
        kind, choice = draw.kind, draw.choice
        if kind == "cut":
            nodes = sorted(self.cluster.proxies)
            if choice < 0.3:
                for proxy in self.cluster.proxies.values():
                    proxy.cut()
                self._record(kind, "all")
            else:
                node = nodes[int(choice * 1000) % len(nodes)]
                self.cluster.proxies[node].cut()
                self._record(kind, f"node {node}")
        elif kind in ("kill", "pause", "long_pause"):
            return self._broker_fault(kind, choice, draw.downtime_s)
        elif kind == "postgres_restart":
            return self._database_fault(kind, "immediate" if choice < 0.5 else "fast")
        elif kind == "failover":
            return self._database_fault(kind, "")
        return True

    def _broker_fault(self, kind: str, choice: float, downtime: float) -> bool:
        role = ROLES[int(choice * 1000) % len(ROLES)]
        with self._lock:
            healthy = sorted(set(self.cluster.brokers) - self._faulted)
            if len(self._faulted) >= len(self.cluster.brokers) - 1:
                self._record(kind, "none", "skipped: the other brokers are faulted")
                return False
        node, why = self._aim(role, healthy, choice)
        broker = self.cluster.brokers[node]
        with self._lock:
            self._faulted.add(node)
        if kind == "kill":
            self.cluster.kill(node)
            self._record(kind, f"node {node}", f"{why}; restarted after {downtime:.1f} s")
            self._recover(kind, node, downtime, partial(self.cluster.revive, node))
        else:
            broker.stop()
            self._record(kind, f"node {node}", f"{why}; SIGSTOP for {downtime:.1f} s")
            self._recover(kind, node, downtime, broker.resume)
        return True

    def _aim(self, role: str, healthy: list[int], choice: float) -> tuple[int, str]:
        """A healthy broker with ``role`` (asking the cluster), else one picked by ``choice``."""
        fallback = healthy[int(choice * 7919) % len(healthy)]
        if role == "any":
            return fallback, "random broker"
        targets = self.targets
        key = ""
        answer = self.cluster.ask(healthy, topics=targets.topics, groups=targets.groups, tids=targets.transactional_ids)
        node = None
        if answer is not None:
            if role == "controller":
                node = answer["controller"]
            elif role == "transaction_coordinator" and answer["transactions"]:
                key = sorted(answer["transactions"])[int(choice * 31) % len(answer["transactions"])]
                node = answer["transactions"][key]
            elif role == "group_coordinator" and answer["groups"]:
                key = sorted(answer["groups"])[int(choice * 31) % len(answer["groups"])]
                node = answer["groups"][key]
            elif role == "leader" and answer["leaders"]:
                topic, partition = sorted(answer["leaders"])[int(choice * 31) % len(answer["leaders"])]
                key, node = f"{topic}-{partition}", answer["leaders"][(topic, partition)]
        if node in healthy:
            return node, f"{role.replace('_', ' ')}{' of ' + key if key else ''}"
        return fallback, f"random broker ({role.replace('_', ' ')} not found among healthy brokers)"

    def _database_fault(self, kind: str, mode: str) -> bool:
        database = self.cluster.database
        assert database is not None
        with self._lock:
            if self._database_busy or (kind == "failover" and database.standby is None):
                self._record(kind, "postgres", "skipped: a database fault is under way or no standby left")
                return False
            self._database_busy = True
        if kind == "failover":
            self._record(kind, "postgres", f"SIGKILL the primary :{database.primary.port}, promote the standby")
            self._recover(kind, 0, 0.0, database.failover)
        else:
            self._record(kind, "postgres", f"pg_ctl restart -m {mode} :{database.primary.port}")
            self._recover(kind, 0, 0.0, lambda: database.restart(mode))
        return True

    # -- recoveries --------------------------------------------------------------------------------------

    def _recover(self, kind: str, node: int, after_s: float, action: Callable[[], None]) -> None:
        def run() -> None:
            time.sleep(after_s)
            try:
                action()
                self._record(f"{kind}_end", f"node {node}" if node else "postgres", step=-1)
            except Exception as exc:  # noqa: BLE001 - logged; heal() retries a broker's start
                log.exception("recovery from %s failed", kind)
                self._record(f"{kind}_end", f"node {node}" if node else "postgres", f"failed: {exc}", step=-1)
            finally:
                with self._lock:
                    if node:
                        self._faulted.discard(node)
                    else:
                        self._database_busy = False

        thread = threading.Thread(target=run, name=f"nemesis-{kind}-{node}", daemon=True)
        self._recoveries.append(thread)
        thread.start()

    def _exited(self, node: int, code: int) -> None:
        self._record("broker_exit", f"node {node}", f"exited by itself with {code}; restarted", step=-1)
        with self._lock:
            self.history.faults["broker_exits"] = self.history.faults.get("broker_exits", 0) + 1

    def _record(self, kind: str, target: str, detail: str = "", step: int | None = None) -> None:
        at = time.monotonic() - self.history.started_at
        event = Fault(round(at, 3), self.step_number if step is None else step, kind, target, detail)
        with self._lock:
            self.history.fault_log.append(event)
            if kind in COUNTERS and not detail.startswith("skipped"):
                self.history.faults[COUNTERS[kind]] += 1
        line = f"fault at {at:.1f} s (step {event.step}): {kind} {target} {detail}".rstrip()
        log.info("%s", line)
        if self.report is not None:
            self.report(line)

    def heal(self) -> None:
        """Wait for every recovery, then make sure every broker runs (for the final reads)."""
        for thread in self._recoveries:
            thread.join(RECOVERY_JOIN_S)
        self._recoveries = [t for t in self._recoveries if t.is_alive()]
        if self._recoveries:
            raise TimeoutError(f"{len(self._recoveries)} recoveries still running after {RECOVERY_JOIN_S:.0f} s")
        for node, broker in self.cluster.brokers.items():
            broker.resume()
            if broker.process is None:
                self.cluster.revive(node)
        self.cluster.wait_met()

    def close(self) -> None:
        """Stop waiting on recoveries (each ends by itself within its downtime) and resume brokers."""
        for thread in self._recoveries:
            thread.join(RECOVERY_JOIN_S)
        for broker in self.cluster.brokers.values():
            broker.resume()
