"""The dispatch table: one module per Kafka API, each a plain function (ctx, request, version).

The handler contract (the server knows nothing else about any API):

- ``API_KEY`` (its request class's key) and optionally ``VERSIONS`` (the versions it serves,
  advertised in ApiVersions; default: every version the codec declares).
- ``ROUTE`` (``server/routes.py``): where the request is answered (here, at each partition's leader,
  at the controller, at a key's coordinator). Its authorization checks are its rows of
  ``broker/security/authorization_rules.py``.
- ``handle(ctx, request, version)`` returns the response, a :class:`~.delayed.Pending` (answered
  later, when its wake key is notified or its deadline passes), or a :class:`~.context.NoResponse`.
- Effects are declared on the context, never performed by the handler: ``ctx.appended`` (records
  or markers were appended: wake parked fetches), ``ctx.touched`` (logs written, for the
  durability policy), ``ctx.sync_before_answer`` (answer only once the writes are durable under
  ``fsync=always``). Coordinator log writes are seen by the server itself; the group coordinators
  a request used (``ctx.groups_for``) report the groups whose parked requests it changed.
- Optionally ``on_fenced(response, logs)``: the answer when logs the request wrote moved to another
  broker before its writes were durable (refused, never written); without it the connection is
  closed and the client retries (Produce answers those partitions NOT_LEADER_OR_FOLLOWER).
- Optionally ``MOVES_GROUP_TIMERS = True``: the request may arm a group timer earlier than the
  one the group loop sleeps for (the loop looks at its deadlines again after it).
- Optionally ``async prepare(ctx, request, limiter)``: CPU-heavy work on worker threads before
  ``handle`` (Produce's record validation); and ``DECODE_INLINE = True`` when large frames of
  this API must still be decoded on the loop (their bulk is handled by ``prepare``).

Only APIs in ``HANDLERS`` are advertised: never one we cannot serve. ``SERVED`` adds the
unadvertised ones (Envelope), which dispatch serves the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import trio

from rivven_kproto.codec.schema import REQUESTS, Request, Response, Versions

from ..context import NoResponse, Partition, Redispatch, RequestContext
from ..delayed import Pending
from ..routes import Route
from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    envelope,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from .api_versions import newer_than_ours

_MODULES: list[ModuleType] = [
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    list_config_resources,
    describe_cluster,
    describe_log_dirs,
    delete_records,
    find_coordinator,
    init_producer_id,
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    sasl_handshake,
    sasl_authenticate,
    create_acls,
    describe_acls,
    delete_acls,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_topic_partitions,
    consumer_group_heartbeat,
    consumer_group_describe,
    share_group_heartbeat,  # share groups (KIP-932): not advertised when off (see api_versions)
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
]


Reply = Response | Pending | NoResponse | Redispatch
Handle = Callable[[RequestContext, Any, int], Reply]
Prepare = Callable[[RequestContext, Any, trio.CapacityLimiter], Awaitable[None]]
OnFenced = Callable[[Any, list[Partition]], Response | NoResponse]  # (response, the moved logs) -> the response to send


@dataclass(frozen=True)
class Handler:
    """One API as its module declares it: what dispatch needs and nothing the shell decides per API."""

    api_key: int
    request_cls: type[Request]
    versions: Versions
    route: Route
    handle: Handle
    prepare: Prepare | None = None
    decode_inline: bool = False
    on_fenced: OnFenced | None = None
    moves_group_timers: bool = False


def declared(module: ModuleType) -> Handler:
    """The module's declaration; TypeError for one without a route (a new API must say where it goes)."""
    key = module.API_KEY
    route = getattr(module, "ROUTE", None)
    if not isinstance(route, Route):
        raise TypeError(f"{module.__name__} declares no ROUTE (Local, Leader, Controller, Coordinator or Unwrap)")
    request_cls = REQUESTS[key]
    # Advertise what the codec declares for this API (issue table), unless the handler narrows it.
    versions = getattr(module, "VERSIONS", request_cls.VALID_VERSIONS)
    return Handler(key, request_cls, versions, route, module.handle, getattr(module, "prepare", None),
                   getattr(module, "DECODE_INLINE", False), getattr(module, "on_fenced", None),
                   getattr(module, "MOVES_GROUP_TIMERS", False))


HANDLERS: dict[int, Handler] = {}
for _module in _MODULES:
    _handler = declared(_module)
    HANDLERS[_handler.api_key] = _handler
# Served but never advertised: Envelope (from brokers only, on their listener).
_UNADVERTISED: list[ModuleType] = [envelope]
SERVED: dict[int, Handler] = {**HANDLERS, **{(h := declared(m)).api_key: h for m in _UNADVERTISED}}



def routed_to(kind: type) -> frozenset[int]:
    """The API keys whose handlers declare a route of this kind (e.g. what an Envelope may carry)."""
    return frozenset(key for key, handler in HANDLERS.items() if isinstance(handler.route, kind))


__all__ = ["HANDLERS", "SERVED", "Handler", "declared", "newer_than_ours", "routed_to"]
