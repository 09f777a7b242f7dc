"""The share coordinator's effects: what runs once its records are in the log (the runtime's
``on``/``run``, ``broker/coordinator_runtime.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReleaseMember:
    """A member's session expired and its tombstone is logged: its share session goes and the
    records it had acquired are available again at once (soft state: nothing more to log)."""

    group_id: str
    member_id: str
