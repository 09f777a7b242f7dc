"""One coordinator runtime: append an operation's records, apply them, run its effects.

Kafka's CoordinatorRuntime shape. A coordinator (a *shard*: groups, transactions, share groups) is
a deterministic state machine: an operation validates and returns a :class:`Result` (the records
to log, the response, the effects to run once the records are durable in the log); its state
changes only in ``shard.apply(record)``, which is also what replays the log at load, so a
coordinator rebuilt from its log is the one that wrote it.

:meth:`CoordinatorRuntime.run` appends the records (one log entry, ``shard.encode``), applies
them, then runs the effects in order. An effect is a plain value (write these markers, complete
these groups' offsets, ...); what runs it is registered with :meth:`CoordinatorRuntime.on`, and
its outcome is fed back to the shard (``then``), whose answer is a follow-up :class:`Result` run
the same way, depth first (a transaction's markers written -> its groups completed -> its
completion logged). An append that fails raises and changes nothing; for a follow-up it is logged
and the chain stops there (the shard's state is as before, and its timer retries).

The runtime does no I/O of its own beyond ``log.append``: fsyncs stay the flusher's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

R = TypeVar("R")
Rec = TypeVar("Rec")
Rec_contra = TypeVar("Rec_contra", contravariant=True)


@dataclass(slots=True)
class Result(Generic[R]):
    """What an operation returns: records to log, the response, effects to run after the append."""

    response: R
    records: Sequence[Any] = ()
    effects: Sequence[Any] = ()


class Shard(Protocol[Rec]):
    """What the runtime needs of a coordinator: its records' one ``apply`` and their log entries."""

    def apply(self, record: Rec) -> None:
        """Change state by one record: live after an append and at load alike."""

    def encode(self, records: Sequence[Rec]) -> bytes:
        """One log entry holding ``records``."""

    def decode(self, payload: bytes) -> Iterable[Rec]:
        """The records of one log entry (as ``encode`` wrote them)."""

    def appended(self, records: Sequence[Rec]) -> None:
        """After each append and apply: the shard's own policy (compaction snapshots)."""


class AppendLog(Protocol):
    def append(self, payload: bytes) -> Any: ...


# (effect, now_ms) -> outcome
EffectRunner = Callable[[Any, int], Any]
# (effect, outcome, now_ms) -> the shard's follow-up, if any
Feedback = Callable[[Any, Any, int], "Result[Any] | None"]


@dataclass
class _Route:
    run: EffectRunner
    then: Feedback | None = None


@dataclass
class CoordinatorRuntime(Generic[Rec]):
    """Runs one shard's operations against its log (see the module docstring)."""

    log: AppendLog | None
    shard: Shard[Rec]
    # How an entry is appended (default ``log.append``): the group coordinator's turns a failure
    # into the request's error (``coordinator_log.append_or_refuse``).
    write: Callable[[bytes], object] | None = None
    _routes: dict[type, _Route] = field(default_factory=dict)

    def on(self, kind: type, run: EffectRunner, then: Feedback | None = None) -> None:
        """Effects of type ``kind`` are run by ``run``; ``then`` gets its outcome (for the shard)."""
        self._routes[kind] = _Route(run, then)

    @contextmanager
    def rerouted(self, kind: type, run: EffectRunner, then: Feedback | None = None) -> Iterator[None]:
        """Effects of type ``kind`` run by ``run`` for the duration of the block, as before after it."""
        before = self._routes.get(kind)
        self.on(kind, run, then)
        try:
            yield
        finally:
            if before is None:
                del self._routes[kind]
            else:
                self._routes[kind] = before

    def replay(self, payloads: Iterable[bytes]) -> int:
        """Apply every record of these log entries (load); returns how many."""
        count = 0
        for payload in payloads:
            for record in self.shard.decode(payload):
                self.shard.apply(record)
                count += 1
        return count

    def run(self, result: Result[R], now_ms: int) -> R:
        """Append and apply ``result``'s records, run its effects; the append's failure raises
        (nothing changed); so does an effect's."""
        self.append(result.records)
        self._run_effects(result.effects, now_ms)
        return result.response

    def append(self, records: Sequence[Rec], *, apply: bool = True) -> None:
        """Log ``records`` as one entry, then apply them (an operation with no effects).

        ``apply=False``: records the live state already holds (the group coordinator's records of
        its members, kept as they change): only a replay applies them."""
        if not records:
            return
        if self.write is not None:
            self.write(self.shard.encode(records))
        elif self.log is not None:
            self.log.append(self.shard.encode(records))
        if apply:
            for record in records:
                self.shard.apply(record)
        self.shard.appended(records)

    def follow(self, result: Result[Any] | None, now_ms: int) -> None:
        """A follow-up (fed back from an effect, or retried by a timer): a failed append is logged
        and ends the chain, leaving the shard as it was for its next retry."""
        if result is None:
            return
        try:
            self.append(result.records)
        except OSError:
            log.exception("coordinator log write failed; the follow-up will be retried")
            return
        self._run_effects(result.effects, now_ms)

    def run_each(self, results: Iterable[Result[Any]], now_ms: int) -> int:
        """Run independent operations one by one (what a timer found due), each as :meth:`run`
        does: one that fails with an OSError (its append or an effect) is logged and the rest still
        run. ``results`` may be lazy: each is made after the one before it ran. Returns how many
        ran whole."""
        done = 0
        for result in results:
            try:
                self.run(result, now_ms)
            except OSError:
                log.exception("coordinator log write failed in a timer's operation; retried at the next")
                continue
            done += 1
        return done

    def _run_effects(self, effects: Sequence[Any], now_ms: int) -> None:
        for effect in effects:
            route = self._routes.get(type(effect))
            if route is None:
                raise TypeError(f"no runner for the effect {effect!r}")
            outcome = route.run(effect, now_ms)
            if route.then is not None:
                self.follow(route.then(effect, outcome, now_ms), now_ms)
