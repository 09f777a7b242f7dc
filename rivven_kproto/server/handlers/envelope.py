"""Envelope (58), v0: another broker forwarding its client's request (KIP-590); never advertised.

Kafka takes Envelopes from brokers on their listener only: elsewhere the connection is closed.
Only a principal allowed ClusterAction on the cluster (a broker) may send one (the refusal is the
envelope's error). The inner request must be one the controller answers (``ROUTE = CONTROLLER``) or a group's
coordinator (``Coordinator``: an OffsetFetch a broker forwards, see ``coordinator_forwarding``),
or an Alter/DeleteShareGroupOffsets a share group's coordinator sends a partition's leader
(``share_offsets``); it is then dispatched as that client's (:class:`~..context.Redispatch`: its principal, its
address, never forwarded again), and its answer goes back inside the envelope.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.config import ConfigError
from rivven_kproto.broker.security.authorization_rules import ENVELOPE
from rivven_kproto.codec.connection import ProtocolError
from rivven_kproto.codec.errors import KafkaError
from rivven_kproto.codec.messages.envelope import EnvelopeRequest, EnvelopeResponse

from ..context import Redispatch, RequestContext
from ..forwarding import envelope_response, unwrap
from ..log_limits import RateLimitedLog
from ..routes import LOCAL, Controller, Coordinator
from ..share_offsets import FORWARDED_API_KEYS as SHARE_OFFSETS_TO_LEADERS

log = logging.getLogger(__name__)
_warnings = RateLimitedLog(log)

API_KEY = EnvelopeRequest.API_KEY
ROUTE = LOCAL  # the envelope is answered here; its inner request is the controller's
CLUSTER = ENVELOPE.check("cluster")


def handle(ctx: RequestContext, request: EnvelopeRequest, version: int) -> EnvelopeResponse | Redispatch:
    from . import routed_to  # the table imports this module

    session = ctx.session
    listener = session.listener_name if session is not None else None
    try:
        brokers_listener: str | None = ctx.config.inter_broker_listener().name
    except ConfigError:
        brokers_listener = None
    if listener != brokers_listener:
        raise ProtocolError(f"{listener}: an Envelope on a listener other than the brokers' ({brokers_listener})")
    refused = ctx.refusal(CLUSTER)
    if refused is not None:
        _warnings.warning("authorization", "an Envelope from %s (%s), who may not act for the cluster: refused",
                          ctx.principal, ctx.client_host)
        return envelope_response(None, refused)
    try:
        inner = unwrap(request, routed_to(Controller) | routed_to(Coordinator) | SHARE_OFFSETS_TO_LEADERS)
    except KafkaError as exc:
        return envelope_response(None, exc.error)
    return Redispatch(inner.event, inner.principal, inner.client_host, envelope_response)
