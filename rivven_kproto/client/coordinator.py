"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (type 1).

The answer is a node id with its address; the address is remembered in the client's broker map
so later requests can be routed there by node id. COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS (a coordinator starting up or moving) are retried until the client's
deadline, as Kafka's clients do; other errors end the lookup. v4 batches keys (KIP-699); v0-3 ask
for one key per request; v0 knows only group keys.
"""

from __future__ import annotations

import enum

import trio

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from rivven_kproto.net.errors import KafkaResponseError

from .client import RETRY_BACKOFF_S, BrokerInfo, KafkaClient


class KeyType(enum.IntEnum):
    GROUP = 0
    TRANSACTION = 1


RETRIABLE_LOOKUP = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR}


async def _ask(client: KafkaClient, key_type: KeyType, key: str) -> tuple[int, str | None, BrokerInfo | None]:
    """(error code, message, coordinator) from one FindCoordinator round trip."""

    def build(version: int) -> FindCoordinatorRequest:
        if version >= 4:
            return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        return FindCoordinatorRequest(key=key, key_type=key_type)

    min_version = 1 if key_type is KeyType.TRANSACTION else 0
    response = await client.call(FindCoordinatorRequest, build, FindCoordinatorResponse, min_version=min_version)
    if response.coordinators:
        answer = next((c for c in response.coordinators if c.key == key), response.coordinators[0])
        error, message, node, host, port = answer.error_code, answer.error_message, answer.node_id, answer.host, answer.port
    else:
        error, message, node, host, port = (
            response.error_code, response.error_message, response.node_id, response.host, response.port,
        )
    if error:
        return error, message, None
    return 0, None, BrokerInfo(node, host, port)


async def find_coordinator(client: KafkaClient, key_type: KeyType, key: str) -> int:
    """The coordinator's node id for ``key``, retrying while no coordinator is available yet."""
    what = "group" if key_type is KeyType.GROUP else "transactional id"
    with client.deadline(f"finding the coordinator of {what} {key}"):
        while True:
            error, message, broker = await _ask(client, key_type, key)
            if broker is not None:
                if client.brokers.get(broker.node_id) != broker:
                    client.brokers[broker.node_id] = broker
                return broker.node_id
            if Errors.for_code(error) not in RETRIABLE_LOOKUP:
                raise KafkaResponseError(error, message, context=f"coordinator of {what} {key}")
            await trio.sleep(RETRY_BACKOFF_S)



async def coordinators(client: KafkaClient, key_type: KeyType, keys: list[str]) -> dict[str, int | None]:
    """One batched FindCoordinator (v4): the node coordinating each key now (None: no coordinator
    available for it, or an error)."""
    if not keys:
        return {}

    def build(version: int) -> FindCoordinatorRequest:
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys)

    response = await client.call(FindCoordinatorRequest, build, FindCoordinatorResponse, min_version=4)
    found: dict[str, int | None] = dict.fromkeys(keys)
    for answer in response.coordinators:
        found[answer.key] = answer.node_id if answer.error_code == 0 else None
    return found
