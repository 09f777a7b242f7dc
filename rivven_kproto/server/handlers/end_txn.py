"""EndTxn (26), v0-5: commit or abort. The two-phase commit (prepare logged, markers written to
every partition, complete logged) finishes before the answer, so a read_committed consumer sees
the transaction as soon as the producer's commit returns. In a cluster, the markers of partitions
other brokers lead are written by those leaders (WriteTxnMarkers); the answer waits for them, up
to MARKERS_WAIT_MS.

v4 only tells us the client knows TRANSACTION_ABORTABLE (KIP-890). v5 on a broker whose
``transaction.version`` is 2 is transactions V2 (KIP-890 part 2, Kafka 4.0): the coordinator bumps
the epoch on every end (the markers carry the new one) and the response carries the producer id
and epoch the client goes on with. On a broker at transaction.version 0 or 1, v5 gets V1
semantics and the response carries the unchanged producer id and epoch.
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse

from ..context import RequestContext
from ..delayed import Pending
from ..routes import LOCAL
from .fetch import APPENDED
from .txn_errors import END_TXN_V2, client_txn_version, fenced_for_version

API_KEY = 26
ROUTE = LOCAL
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
MARKERS_WAIT_MS = 5_000  # at most this long for other leaders' markers; the transaction completes anyway


def handle(ctx: RequestContext, request: EndTxnRequest, version: int) -> EndTxnResponse | Pending:
    if (refused := ctx.refusal(TRANSACTIONAL_ID, request.transactional_id)) is not None:
        return EndTxnResponse(error_code=refused)
    if not ctx.broker.coordinates(request.transactional_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return EndTxnResponse(error_code=Errors.NOT_COORDINATOR)
    coordinator = ctx.txn_for(request.transactional_id)
    ctx.appended = True  # markers: the last stable offset moved, wake read_committed fetches
    if client_txn_version(ctx.config.transaction_version, version, END_TXN_V2) >= 2:
        error, producer_id, epoch = coordinator.end_txn_v2(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.now_ms
        )
        return _after_markers(ctx, request.transactional_id, error,
                              EndTxnResponse(error_code=error, producer_id=producer_id, producer_epoch=epoch))
    error = coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.now_ms
    )
    response = EndTxnResponse(error_code=fenced_for_version(error, version, 2))
    if version >= END_TXN_V2 and error == Errors.NONE:
        response.producer_id, response.producer_epoch = request.producer_id, request.producer_epoch
    return _after_markers(ctx, request.transactional_id, error, response)


def _after_markers(ctx: RequestContext, transactional_id: str, error: Errors, response: EndTxnResponse
                   ) -> EndTxnResponse | Pending:
    """Some markers go to partitions other brokers lead (a cluster): answer once they are
    written, as alone, so that the producer's next transaction does not find this one completing."""
    txn = ctx.txn_for(transactional_id)
    if error != Errors.NONE or transactional_id not in txn.unwritten:
        return response

    def written(now_ms: int) -> EndTxnResponse | None:
        return response if transactional_id not in txn.unwritten else None

    return Pending(APPENDED, ctx.now_ms + MARKERS_WAIT_MS, written, lambda now_ms: response)
