"""DescribeTransactions (65), v0: the coordinator's view of transactional ids (KIP-664).

As Kafka, the partitions of topics the caller may not Describe are left out of a transaction's
answer (issue #37 item 9): Describe on the transactional id does not reveal the topic names.
"""

from __future__ import annotations

from collections import defaultdict

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = 65
ROUTE = LOCAL
TRANSACTIONAL_ID = rule(API_KEY).check("transactional_id")
TOPIC = rule(API_KEY).check("topic")  # filters: partitions of undescribable topics are left out


def handle(ctx: RequestContext, request: DescribeTransactionsRequest, version: int) -> DescribeTransactionsResponse:
    states = []
    for transactional_id in request.transactional_ids:
        coordinator = ctx.broker.txn_coordinator(transactional_id)
        if coordinator is None and ctx.permits(TRANSACTIONAL_ID, transactional_id):
            states.append(TransactionState(  # its shard is another broker's
                error_code=Errors.NOT_COORDINATOR, transactional_id=transactional_id,
                transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
            ))
            continue
        txn = coordinator.txns.get(transactional_id) if coordinator is not None else None
        if (refused := ctx.refusal(TRANSACTIONAL_ID, transactional_id)) is not None:
            states.append(
                TransactionState(
                    error_code=refused, transactional_id=transactional_id,
                    transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                )
            )
            continue
        if txn is None:
            states.append(
                TransactionState(
                    error_code=Errors.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=transactional_id,
                    transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                )
            )
            continue
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in sorted(txn.partitions):
            by_topic[topic].append(index)
        visible = {t: p for t, p in by_topic.items() if ctx.permits(TOPIC, t)}
        states.append(
            TransactionState(
                error_code=Errors.NONE,
                transactional_id=transactional_id,
                transaction_state=txn.state.value,
                transaction_timeout_ms=txn.timeout_ms,
                transaction_start_time_ms=txn.start_ms if txn.state is TxnState.ONGOING else -1,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=[TopicData(topic=t, partitions=p) for t, p in visible.items()],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)
