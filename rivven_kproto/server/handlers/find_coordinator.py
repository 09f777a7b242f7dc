"""FindCoordinator (10), v0-4, including the batched v4 form.

A key of the types listed in ``COORDINATED`` (0, group; 1, transaction) is coordinated by the
broker holding its coordinator shard (this one, alone on the native log; see
``broker/coordinator_shards``), answered with its node id and advertised host and port, or
COORDINATOR_NOT_AVAILABLE while nobody holds the shard; other key types get INVALID_REQUEST. librdkafka also infers broker
features from this API: without FindCoordinator it silently disables LZ4 compression (see
compat_tests/FINDINGS.rst).

On a cluster a shard has no holder for a few heartbeats after its holder died (the next one takes
it after ``LEASE_TAKEOVER_BEATS``), and this broker cannot name one while its own claims are being
confirmed. Such an answer is held (a delayed response, woken by each heartbeat) for up to
``HEARTBEAT_HOLD_MS`` until a holder is known: librdkafka spends its three attempts within a third of a
second and then waits for a broker state change (97 s seen), so answering COORDINATOR_NOT_AVAILABLE
at once turns a seconds-long handover into a stalled transaction (``send_offsets_to_transaction``).
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

from ..context import RequestContext
from ..delayed import HEARTBEAT_FOLLOWED, HEARTBEAT_HOLD_MS, Pending
from ..routes import LOCAL

API_KEY = 10
ROUTE = LOCAL
GROUP, TRANSACTION = 0, 1
COORDINATED = {GROUP, TRANSACTION}
KNOWN_KEY_TYPES = (GROUP, TRANSACTION)
CHECKS = {GROUP: rule(API_KEY).check("group"), TRANSACTION: rule(API_KEY).check("transactional_id")}
NOT_YET = "this broker does not coordinate keys of this type"
SHARD_UNHELD = "no broker coordinates this key's shard now"
CONFIRMING = "this broker is confirming its view of the cluster"
TRANSIENT = (SHARD_UNHELD, CONFIRMING)
Answer = tuple[Errors, str | None, int, str, int]  # error, message, node id, host, port


def _lookup(key_type: int) -> tuple[Errors, str | None]:
    if key_type not in KNOWN_KEY_TYPES:
        return Errors.INVALID_REQUEST, f"Unknown coordinator key type {key_type}"
    if key_type not in COORDINATED:
        return Errors.COORDINATOR_NOT_AVAILABLE, NOT_YET
    return Errors.NONE, None


def handle(ctx: RequestContext, request: FindCoordinatorRequest, version: int) -> FindCoordinatorResponse | Pending:
    keys = request.coordinator_keys if version >= 4 else [request.key]

    def answers() -> list[Answer]:
        return [_answer(ctx, request.key_type, key) for key in keys]

    first = answers()
    if not any(answer[1] in TRANSIENT for answer in first):
        return _response(keys, first, version)

    def complete(now_ms: int) -> FindCoordinatorResponse | None:
        found = answers()
        return None if any(answer[1] in TRANSIENT for answer in found) else _response(keys, found, version)

    return Pending(HEARTBEAT_FOLLOWED, ctx.now_ms + HEARTBEAT_HOLD_MS, complete,
                   lambda now_ms: _response(keys, answers(), version))


def _response(keys: list[str], answers: list[Answer], version: int) -> FindCoordinatorResponse:
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
                for key, (error, message, node, host, port) in zip(keys, answers, strict=True)
            ]
        )
    error, message, node, host, port = answers[0]
    return FindCoordinatorResponse(
        error_code=error, error_message=message if version >= 1 else "", node_id=node, host=host, port=port
    )


def _answer(ctx: RequestContext, key_type: int, key: str) -> Answer:
    error, message = _lookup(key_type)
    if error == Errors.NONE and (refused := ctx.refusal(CHECKS[key_type], key)) is not None:
        error, message = refused, None
    if error != Errors.NONE:
        return error, message, -1, "", -1
    if not ctx.broker.claims.valid:  # its heartbeat is stale: its view of the shards may be too
        return Errors.COORDINATOR_NOT_AVAILABLE, CONFIRMING, -1, "", -1
    coordinator = ctx.broker.cluster.key_owner(key)
    address = ctx.address_of(coordinator) if coordinator is not None else None
    if coordinator is None or address is None:  # the shard's holder died and no broker took it yet
        return Errors.COORDINATOR_NOT_AVAILABLE, SHARD_UNHELD, -1, "", -1
    return error, message, coordinator, *address
