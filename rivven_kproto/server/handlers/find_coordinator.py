"""FindCoordinator (10), v0-4, including the batched v4 form.

The group and transaction coordinators are not implemented yet, so every lookup of key type 0
(group) or 1 (transaction) answers COORDINATOR_NOT_AVAILABLE, which clients treat as retriable;
other key types get INVALID_REQUEST. The API is still advertised because librdkafka infers broker
features from it: without FindCoordinator it silently disables LZ4 compression (see
compat_tests/FINDINGS.rst).
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

from ..context import RequestContext

API_KEY = 10
KNOWN_KEY_TYPES = (0, 1)
NOT_YET = "the group and transaction coordinators are not implemented yet"


def _lookup(key_type: int) -> tuple[Errors, str]:
    if key_type not in KNOWN_KEY_TYPES:
        return Errors.INVALID_REQUEST, f"Unknown coordinator key type {key_type}"
    return Errors.COORDINATOR_NOT_AVAILABLE, NOT_YET


def handle(ctx: RequestContext, request: FindCoordinatorRequest, version: int) -> FindCoordinatorResponse:
    error, message = _lookup(request.key_type)
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message)
                for key in request.coordinator_keys
            ]
        )
    return FindCoordinatorResponse(
        error_code=error, error_message=message if version >= 1 else "", node_id=-1, host="", port=-1
    )
