"""EndTxn (26), v0-3: commit or abort. The two-phase commit (prepare logged, markers written to
every partition, complete logged) finishes before the answer, so a read_committed consumer sees
the transaction as soon as the producer's commit returns."""

from __future__ import annotations

from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse

from ..context import RequestContext
from .txn_errors import fenced_for_version

API_KEY = 26


def handle(ctx: RequestContext, request: EndTxnRequest, version: int) -> EndTxnResponse:
    if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = ctx.broker.txn.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.now_ms
    )
    ctx.appended = True  # markers: the last stable offset moved, wake read_committed fetches
    return EndTxnResponse(error_code=fenced_for_version(error, version, 2))
