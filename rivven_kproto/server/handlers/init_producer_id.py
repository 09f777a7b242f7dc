"""InitProducerId (22), v0-4: producer ids for idempotent producers.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, including for
the KIP-360 form (v3+, producer id and epoch in the request), and so do we. Transactional ids need
the transaction coordinator, which is not implemented yet: they get COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

from ..context import RequestContext

API_KEY = 22


def handle(ctx: RequestContext, request: InitProducerIdRequest, version: int) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=Errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    producer_id = ctx.broker.producer_ids.allocate()
    return InitProducerIdResponse(error_code=Errors.NONE, producer_id=producer_id, producer_epoch=0)
