"""InitProducerId (22), v0-5: producer ids for idempotent and transactional producers.

v5 only tells us the client knows TRANSACTION_ABORTABLE (KIP-890). v6 (KIP-939 two-phase commit)
is declared by the codec but not served: it is unstable in Kafka 4.x, which does not advertise it.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, including for
the KIP-360 form (v3+, producer id and epoch in the request), and so do we. With one, the
transaction coordinator bumps the epoch (fencing the previous instance, aborting what it left
open: CONCURRENT_TRANSACTIONS until done) or recovers a KIP-360 producer.
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from rivven_kproto.codec.schema import Versions

from ..context import RequestContext
from ..routes import LOCAL
from .txn_errors import fenced_for_version

API_KEY = 22
VERSIONS = Versions(0, 5)
ROUTE = LOCAL
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
# Kafka 3+: IdempotentWrite on the Cluster, or (the table's alternative) Write on some topic.
IDEMPOTENT = rule(API_KEY).check("idempotent")


def handle(ctx: RequestContext, request: InitProducerIdRequest, version: int) -> InitProducerIdResponse:
    if request.transactional_id is None:
        if (refused := ctx.refusal(IDEMPOTENT)) is not None:
            return InitProducerIdResponse(error_code=refused, producer_id=-1, producer_epoch=-1)
        producer_id = ctx.broker.producer_ids.allocate()
        return InitProducerIdResponse(error_code=Errors.NONE, producer_id=producer_id, producer_epoch=0)
    if (refused := ctx.refusal(TRANSACTIONAL_ID, request.transactional_id)) is not None:
        return InitProducerIdResponse(error_code=refused, producer_id=-1, producer_epoch=-1)
    if not ctx.broker.coordinates(request.transactional_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return InitProducerIdResponse(error_code=Errors.NOT_COORDINATOR, producer_id=-1, producer_epoch=-1)
    error, producer_id, epoch = ctx.txn_for(request.transactional_id).init_producer_id(
        request.transactional_id,
        request.transaction_timeout_ms,
        request.producer_id,
        request.producer_epoch,
        ctx.now_ms,
    )
    ctx.appended = True  # fencing may have aborted a transaction: markers written, LSO moved
    return InitProducerIdResponse(
        error_code=fenced_for_version(error, version, 4), producer_id=producer_id, producer_epoch=epoch
    )
