"""EndTxn (26), v0-3: commit or abort. The two-phase commit (prepare logged, markers written to
every partition, complete logged) finishes before the answer, so a read_committed consumer sees
the transaction as soon as the producer's commit returns. In a cluster, the markers of partitions
other brokers lead are written by those leaders (WriteTxnMarkers); the answer waits for them, up
to MARKERS_WAIT_MS."""

from __future__ import annotations

from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse

from ..context import RequestContext
from ..delayed import Pending
from .fetch import APPENDED
from .txn_errors import fenced_for_version

API_KEY = 26
MARKERS_WAIT_MS = 5_000  # at most this long for other leaders' markers; the transaction completes anyway


def handle(ctx: RequestContext, request: EndTxnRequest, version: int) -> EndTxnResponse | Pending:
    if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = ctx.broker.txn.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.now_ms
    )
    ctx.appended = True  # markers: the last stable offset moved, wake read_committed fetches
    response = EndTxnResponse(error_code=fenced_for_version(error, version, 2))
    if error != Errors.NONE or request.transactional_id not in ctx.broker.txn.unwritten:
        return response
    # Some markers go to partitions other brokers lead (a cluster): answer once they are written,
    # as alone, so that the producer's next transaction does not find this one still completing.
    txn = ctx.broker.txn
    transactional_id = request.transactional_id

    def written(now_ms: int) -> EndTxnResponse | None:
        return response if transactional_id not in txn.unwritten else None

    return Pending(APPENDED, ctx.now_ms + MARKERS_WAIT_MS, written, lambda now_ms: response)
