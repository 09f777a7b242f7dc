"""AddOffsetsToTxn (25), v0-3: the group's offsets join the transaction (committed by
TxnOffsetCommit, made visible or dropped by the transaction's end)."""

from __future__ import annotations

from rivven_kproto.codec.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..context import RequestContext
from .txn_errors import fenced_for_version

API_KEY = 25


def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest, version: int) -> AddOffsetsToTxnResponse:
    error = ctx.broker.txn.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, ctx.now_ms
    )
    return AddOffsetsToTxnResponse(error_code=fenced_for_version(error, version, 2))
