"""A group request sent to a broker that does not coordinate the group, forwarded to the one that
does (in an Envelope carrying the client's principal and address, so its ACLs apply there).

Kafka answers such a request NOT_COORDINATOR and the client looks the coordinator up again. For
OffsetFetch v8+ that answer is a group-level error with no partitions, which librdkafka (#5586)
never retries for the partitions of a new assignment: the consumer never starts fetching them
(verify-eos seed 77: a transform stage stuck from its first assignment, after the group's shard
moved). Forwarded, the request is answered by the coordinator; a forward that fails leaves the
request to be answered here (NOT_COORDINATOR), as before.
"""

from __future__ import annotations

import logging

import trio

from rivven_kproto.codec.connection import ProtocolError
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.envelope import EnvelopeResponse
from rivven_kproto.codec.schema import Request

from .context import RequestContext
from .forwarding import ENVELOPE_VERSION, unwrap_response, wrap_request
from .peers import R, call, decode_response

log = logging.getLogger(__name__)


async def forward_to_coordinator(ctx: RequestContext, keys: list[str], request: Request, response_cls: type[R]) -> R | None:
    """The coordinator's answer to ``request`` when every key's coordinator is one other live
    broker of the cluster, else None (answered here). Never forwards a forwarded request again."""
    broker, session = ctx.broker, ctx.session
    if broker.claims.bound_s is None or session is None or session.forwarded_principal is not None or not keys:
        return None
    if any(broker.coordinates(key) for key in keys):
        return None
    nodes = {node.node_id: node for key in keys if (node := broker.cluster.key_coordinator(key)) is not None}
    if len(nodes) != 1 or broker.cluster.self_id in nodes:
        return None
    (node,) = nodes.values()
    header = RequestHeader(request_api_key=request.API_KEY, request_api_version=ctx.api_version, correlation_id=0,
                           client_id=ctx.client_id)
    envelope = wrap_request(header, request, ctx.principal, ctx.client_host)
    try:
        answer = await call(node, envelope, ENVELOPE_VERSION, EnvelopeResponse, broker.cluster.self_id)
        frame = unwrap_response(answer)
        return decode_response(frame, request, ctx.api_version, response_cls)
    except (OSError, trio.TooSlowError, ProtocolError, ValueError) as exc:
        log.info("forwarding API %d to the coordinator (node %d) failed: %s; answered here", request.API_KEY,
                 node.node_id, exc)
        return None

