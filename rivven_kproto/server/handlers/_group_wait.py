"""How group handlers park a request the coordinator cannot answer yet (see ``server/delayed.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rivven_kproto.broker.groups import Awaiting
from rivven_kproto.broker.groups.api import Result

from ..context import RequestContext
from ..delayed import Pending, wake_key


def park(
    ctx: RequestContext, awaiting: Awaiting, respond: Callable[[Result], Any], on_expiry: Callable[[], Any]
) -> Pending:
    """A Pending that answers with the ticket's result; at expiry (or if abandoned) it gives the
    ticket back, so a result completed later is dropped rather than kept."""
    coordinator = ctx.groups_for(awaiting.group_id)

    def complete(now_ms: int) -> Any | None:
        if ctx.broker.group_coordinator(awaiting.group_id) is not coordinator:
            # The group's shard went to another broker (or this broker's claims lapsed) while the
            # request waited: nothing here will ever complete it; the client finds the coordinator again.
            coordinator.cancel(awaiting.ticket)
            return on_expiry()
        result = coordinator.take_result(awaiting.ticket)
        return None if result is None else respond(result)

    def expire(now_ms: int) -> Any:
        coordinator.cancel(awaiting.ticket)
        return on_expiry()

    return Pending(wake_key(awaiting.group_id), awaiting.deadline_ms, complete, expire)
