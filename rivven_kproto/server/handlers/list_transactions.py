"""ListTransactions (66), v0-1: transactional ids filtered by state, producer id and (v1)
minimum running time (KIP-664, KIP-994). Unknown state names are echoed back, as Kafka does."""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = 66
ROUTE = LOCAL
LISTED = rule(API_KEY).check("transactional_id")
_STATE_NAMES = {state.value for state in TxnState}


def handle(ctx: RequestContext, request: ListTransactionsRequest, version: int) -> ListTransactionsResponse:
    unknown = [name for name in request.state_filters if name not in _STATE_NAMES]
    states = set(request.state_filters) - set(unknown)
    producers = set(request.producer_id_filters)
    listed = []
    for txn in (t for coordinator in ctx.broker.txn_coordinators() for t in coordinator.txns.values()):
        if not ctx.permits(LISTED, txn.transactional_id):
            continue  # Kafka leaves out ids the client may not describe
        if request.state_filters and txn.state.value not in states:
            continue
        if producers and txn.producer_id not in producers:
            continue
        if request.duration_filter >= 0 and (
            txn.state is not TxnState.ONGOING or ctx.now_ms - txn.start_ms < request.duration_filter
        ):
            continue
        listed.append(
            TransactionState(
                transactional_id=txn.transactional_id, producer_id=txn.producer_id, transaction_state=txn.state.value
            )
        )
    return ListTransactionsResponse(error_code=Errors.NONE, unknown_state_filters=unknown, transaction_states=listed)
