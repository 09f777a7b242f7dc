"""Share sessions (KIP-932's ShareSessionCache): which partitions a member's ShareFetch covers.

Soft state, as in Kafka: a broker restart loses them and clients open new ones (epoch 0).
Epoch 0 opens (replacing an open one), -1 closes, any other must be the next epoch. As in Kafka,
a session belongs to the connection that opened it: when that connection goes (the consumer
killed or gone without closing its session), the session goes and the member's acquired records
are released (:meth:`ShareSessions.drop_if_opened_by`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rivven_kproto.codec.errors import Errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000  # Kafka's group.share.max.share.sessions default

Key = tuple[str, int]  # (topic, partition)


@dataclass
class ShareSession:
    epoch: int  # the epoch the next request must carry
    partitions: set[Key] = field(default_factory=set)
    connection: object = None  # the connection that opened it (the server's token)


class ShareSessions:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def update(self, group_id: str, member_id: str, epoch: int, added: list[Key],
               forgotten: list[Key]) -> tuple[Errors, ShareSession | None]:
        """Apply one request's session fields; the session to fetch from (None when closing)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if key not in self.sessions and len(self.sessions) >= self.limit:
                return Errors.SHARE_SESSION_LIMIT_REACHED, None
            opened = self.sessions[key] = ShareSession(1, set(added))
            return Errors.NONE, opened
        session = self.sessions.get(key)
        if session is None:
            return Errors.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return Errors.NONE, None
        if epoch != session.epoch:
            return Errors.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.partitions.update(added)
        session.partitions.difference_update(forgotten)
        return Errors.NONE, session

    def check(self, group_id: str, member_id: str, epoch: int) -> Errors:
        """ShareAcknowledge: the session must exist with this epoch (or be closing with -1)."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return Errors.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_EPOCH:
            del self.sessions[(group_id, member_id)]
            return Errors.NONE
        if epoch == INITIAL_EPOCH or epoch != session.epoch:
            return Errors.INVALID_SHARE_SESSION_EPOCH
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        return Errors.NONE

    def drop_member(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)

    def drop_if_opened_by(self, group_id: str, member_id: str, connection: object) -> bool:
        """The member's session goes if ``connection`` opened it (not one the member opened again
        on another connection since); True when it went."""
        session = self.sessions.get((group_id, member_id))
        if session is None or session.connection is not connection:
            return False
        del self.sessions[(group_id, member_id)]
        return True
