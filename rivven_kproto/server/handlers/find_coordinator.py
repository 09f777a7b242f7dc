"""FindCoordinator (10), v0-4, including the batched v4 form.

A key of the types listed in ``COORDINATED`` (0, group; 1, transaction) is coordinated by the
broker holding its coordinator shard (this one, alone on the native log; see
``broker/coordinator_shards``), answered with its node id and advertised host and port, or
COORDINATOR_NOT_AVAILABLE while nobody holds the shard; other key types get INVALID_REQUEST. librdkafka also infers broker
features from this API: without FindCoordinator it silently disables LZ4 compression (see
compat_tests/FINDINGS.rst).
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

API_KEY = 10
GROUP, TRANSACTION = 0, 1
COORDINATED = {GROUP, TRANSACTION}
KNOWN_KEY_TYPES = (GROUP, TRANSACTION)
CHECKS = {GROUP: rule(API_KEY).check("group"), TRANSACTION: rule(API_KEY).check("transactional_id")}
NOT_YET = "this broker does not coordinate keys of this type"


def _lookup(key_type: int) -> tuple[Errors, str | None]:
    if key_type not in KNOWN_KEY_TYPES:
        return Errors.INVALID_REQUEST, f"Unknown coordinator key type {key_type}"
    if key_type not in COORDINATED:
        return Errors.COORDINATOR_NOT_AVAILABLE, NOT_YET
    return Errors.NONE, None


def handle(ctx: RequestContext, request: FindCoordinatorRequest, version: int) -> FindCoordinatorResponse:
    keys = request.coordinator_keys if version >= 4 else [request.key]
    answers = [_answer(ctx, request.key_type, key) for key in keys]
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


def _answer(ctx: RequestContext, key_type: int, key: str) -> tuple[Errors, str | None, int, str, int]:
    error, message = _lookup(key_type)
    if error == Errors.NONE and (refused := ctx.refusal(CHECKS[key_type], key)) is not None:
        error, message = refused, None
    if error != Errors.NONE:
        return error, message, -1, "", -1
    if not ctx.broker.claims.valid:  # its heartbeat is stale: its view of the shards may be too
        return Errors.COORDINATOR_NOT_AVAILABLE, "this broker is confirming its view of the cluster", -1, "", -1
    coordinator = ctx.broker.cluster.key_owner(key)
    address = ctx.address_of(coordinator) if coordinator is not None else None
    if coordinator is None or address is None:  # the shard's holder died and no broker took it yet
        return Errors.COORDINATOR_NOT_AVAILABLE, "no broker coordinates this key's shard now", -1, "", -1
    return error, message, coordinator, *address
