"""AddOffsetsToTxn (25), v0-4: the group's offsets join the transaction (committed by
TxnOffsetCommit, made visible or dropped by the transaction's end). v4 only tells us the client
knows TRANSACTION_ABORTABLE (KIP-890); a transactions-V2 client skips this call (TxnOffsetCommit v5
adds the group itself)."""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..context import RequestContext
from ..routes import LOCAL
from .txn_errors import fenced_for_version

API_KEY = 25
ROUTE = LOCAL
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
GROUP = rule(API_KEY).check("group")


def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest, version: int) -> AddOffsetsToTxnResponse:
    refused = ctx.refusal(TRANSACTIONAL_ID, request.transactional_id) or ctx.refusal(GROUP, request.group_id)
    if refused is not None:
        return AddOffsetsToTxnResponse(error_code=refused)
    if not ctx.broker.coordinates(request.transactional_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return AddOffsetsToTxnResponse(error_code=Errors.NOT_COORDINATOR)
    error = ctx.txn_for(request.transactional_id).add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, ctx.now_ms
    )
    return AddOffsetsToTxnResponse(error_code=fenced_for_version(error, version, 2))
