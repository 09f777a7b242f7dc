"""IncrementalAlterConfigs (key 44), versions 0-1: SET/DELETE/APPEND/SUBTRACT on topic configs.

The operations are applied to the topic's current overrides, then the result is validated and
saved as a whole (``Broker.set_topic_configs``), as Kafka 3.9's controller does: SET (0) sets,
DELETE (1) removes the override (deleting an unknown or absent key is a no-op), APPEND (2) and
SUBTRACT (3) edit the comma-separated value of a LIST config (cleanup.policy, the throttled
replica lists), starting from the default when there is no override; on any other config they
are INVALID_CONFIG ("Can't APPEND to key x because its type is not LIST."). Checks and messages
otherwise match AlterConfigs: duplicate resource or key and a null value for anything but DELETE
are INVALID_REQUEST, an unknown operation INVALID_REQUEST, bad configs INVALID_CONFIG, an unknown
topic UNKNOWN_TOPIC_OR_PARTITION. ``validate_only`` checks without saving.

BROKER resources: the same operations on the dynamic broker configs of the cluster default ("")
or this node (``broker/dynamic_configs.py``); a read-only key is INVALID_REQUEST "Cannot update
these configs dynamically: Set(...)". GROUP resources: a group's configs (Kafka 4.2's group config
keys: ``broker/group_configs.py``). BROKER_LOGGER and other resource types are INVALID_REQUEST.

Not implemented: alter-config policies, BROKER_LOGGER (log4j levels) and
CLIENT_METRICS resources.
"""

from __future__ import annotations

from rivven_kproto.broker.topics import TOPIC_CONFIGS, is_list_config
from rivven_kproto.codec.enums import AlterConfigOp
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from rivven_kproto.server.context import RequestContext

from ..routes import CONTROLLER
from ._config_alters import alter_each, check_nulls
from .describe_configs import BROKER, GROUP

API_KEY = IncrementalAlterConfigsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer


_OP_CODES = frozenset(int(op) for op in AlterConfigOp)


def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest, version: int
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=alter_each(
        ctx, API_KEY, request.resources, request.validate_only, _check, _new_configs, AlterConfigsResourceResponse,
    ))


def _check(resource: AlterConfigsResource) -> None:
    check_nulls([c.name for c in resource.configs if c.config_operation != AlterConfigOp.DELETE and c.value is None])
    for config in resource.configs:
        if config.config_operation not in _OP_CODES:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown operations type {config.config_operation}")


def _new_configs(ctx: RequestContext, resource: AlterConfigsResource) -> dict[str, str]:
    """The operations applied to the level's current configs (a broker level, a topic's overrides)."""
    if resource.resource_type == BROKER:
        current = ctx.broker.dynamic.level(resource.resource_name)
    elif resource.resource_type == GROUP:
        current = ctx.broker.group_configs.level(resource.resource_name)
    else:
        topic = ctx.broker.topics.get(resource.resource_name)
        current = dict(topic.meta.configs) if topic is not None else {}
    return apply_operations(current, resource.configs)


def apply_operations(current: dict[str, str], operations: list[AlterableConfig]) -> dict[str, str]:
    """The overrides after the operations (Kafka's incrementalAlterConfigResource), unvalidated."""
    configs = dict(current)
    for op in operations:
        kind = AlterConfigOp(op.config_operation)
        if kind == AlterConfigOp.SET:
            configs[op.name] = op.value or ""
        elif kind == AlterConfigOp.DELETE:
            configs.pop(op.name, None)
        else:
            if not is_list_config(op.name):
                raise KafkaError(
                    Errors.INVALID_CONFIG, f"Can't {kind.name} to key {op.name} because its type is not LIST."
                )
            base = configs.get(op.name, TOPIC_CONFIGS[op.name].default)
            items = [item for item in base.split(",") if item]
            for value in _java_split(op.value or ""):
                if kind == AlterConfigOp.APPEND and value not in items:
                    items.append(value)
                elif kind == AlterConfigOp.SUBTRACT and value in items:
                    items.remove(value)
            configs[op.name] = ",".join(items)
    return configs


def _java_split(text: str) -> list[str]:
    """Java's String.split(","): trailing empty strings dropped; without a comma, [text]."""
    if "," not in text:
        return [text]
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts

