"""A share consumer's connection gone: its share sessions there go, and its acquired records are
released at once (KIP-932; Kafka's share session cache does this when the connection that opened
a session disconnects).

A consumer that is killed, or leaves without closing its share sessions, would otherwise keep its
records locked until their acquisition locks expire (``group.share.record.lock.duration.ms``) or,
on one broker, until the group's coordinator expires the member. On PostgreSQL and the cluster the
partitions' leaders keep the share-partitions (``broker/share/leaders.py``) and never hear of the
member's departure from the group's coordinator: the connection is what they see. Acquisition is
soft state (acquired records are persisted as available), so a release writes nothing.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.share import SharePartitions
from rivven_kproto.broker.share.sessions import ShareSession

from .context import RequestContext
from .session import Session

log = logging.getLogger(__name__)


def opened_by_connection(ctx: RequestContext, session: ShareSession, group_id: str, member_id: str) -> None:
    """A ShareFetch opened ``session`` (epoch 0) on this connection: it belongs to it."""
    connection = ctx.session
    if connection is None or connection.forwarded_principal is not None:
        return
    session.connection = connection
    connection.share_sessions.add((group_id, member_id))


def _keeper(broker: Broker, group_id: str) -> SharePartitions | None:
    if broker.leader_shares is not None:
        return broker.leader_shares
    return broker.shards[broker.shard_of(group_id)].share if broker.coordinates(group_id) else None


def release_disconnected(broker: Broker, connection: Session) -> bool:
    """The connection closed: the share sessions it opened (and still holds) go, their members'
    acquired records are available again. True when some were (parked share fetches look again)."""
    released = False
    for group_id, member_id in sorted(connection.share_sessions):
        keeper = _keeper(broker, group_id)
        if keeper is not None and keeper.sessions.drop_if_opened_by(group_id, member_id, connection):
            log.info("share group %s: member %s's connection closed; its acquired records are released",
                     group_id, member_id)
            keeper.release_session(group_id, member_id)
            released = True
    connection.share_sessions.clear()
    return released
