"""AlterConfigs (key 33), versions 0-2: replace a topic's whole set of config overrides.

Legacy (non-incremental) semantics: the configs sent become the topic's overrides; any override
not sent is removed. Per resource, in Kafka 3.9's order (broker preprocessing, then the
controller): a resource named twice is INVALID_REQUEST for both; a key given twice or a null value
INVALID_REQUEST; a topic resource with an empty name INVALID_REQUEST, an illegal name
INVALID_TOPIC_EXCEPTION, an unknown key or bad value INVALID_CONFIG (Kafka's message), an unknown
topic UNKNOWN_TOPIC_OR_PARTITION. ``validate_only`` checks without saving.

BROKER resources: this node's id or "" (cluster default). The log defaults are dynamic
(``broker/dynamic_configs.py``): the configs sent become that level's values (an empty set clears
it); a read-only key is INVALID_REQUEST "Cannot update these configs dynamically: Set(...)", as
Kafka answers for its static configs, a bad value INVALID_CONFIG. Another node id, or a name that
is not a number, is INVALID_REQUEST. Other resource types are INVALID_REQUEST ("Unknown resource
type N"). Success answers a null message.

Not implemented: alter-config policies, CLIENT_METRICS.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from rivven_kproto.broker.topics import validate_topic_name
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from rivven_kproto.server.context import RequestContext

from .describe_configs import BROKER, TOPIC, broker_id, check_config_access

log = logging.getLogger(__name__)

API_KEY = AlterConfigsRequest.API_KEY


class _Resource(Protocol):
    resource_type: int
    resource_name: str


def handle(ctx: RequestContext, request: AlterConfigsRequest, version: int) -> AlterConfigsResponse:
    duplicates = duplicate_resources(request.resources)
    responses = []
    for resource in request.resources:
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise KafkaError(Errors.INVALID_REQUEST, "Each resource must appear at most once.")
            check_config_names([config.name for config in resource.configs])
            check_nulls([config.name for config in resource.configs if config.value is None])
            _alter(ctx, resource, request.validate_only)
        except KafkaError as exc:
            responses.append(_response(resource, exc.error, exc.message))
        else:
            responses.append(_response(resource, Errors.NONE, None))
    return AlterConfigsResponse(responses=responses)


def _alter(ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool) -> None:
    check_config_access(ctx, API_KEY, resource.resource_type, resource.resource_name)
    if resource.resource_type == BROKER:
        check_broker_resource(ctx, resource.resource_name)
        configs = {config.name: config.value or "" for config in resource.configs}
        save_broker_configs(ctx, resource.resource_name, configs, validate_only)
    elif resource.resource_type == TOPIC:
        configs = {config.name: config.value or "" for config in resource.configs}
        save_topic_configs(ctx, resource.resource_name, configs, validate_only)
    else:
        raise KafkaError(Errors.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


# -- shared with IncrementalAlterConfigs ----------------------------------------------------------


def duplicate_resources(resources: Sequence[_Resource]) -> set[tuple[int, str]]:
    counts = Counter((resource.resource_type, resource.resource_name) for resource in resources)
    return {key for key, n in counts.items() if n > 1}


def check_config_names(names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")


def check_nulls(null_names: list[str]) -> None:
    if null_names:
        raise KafkaError(Errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(null_names))


def check_broker_resource(ctx: RequestContext, name: str) -> None:
    """ "" is the cluster default; otherwise it must be this node's id (Kafka's messages), or on
    the controller of brokers sharing a store that of a live broker (the request was forwarded to
    it, and that broker follows the stored values)."""
    if not name:
        return
    node = broker_id(name, "Node id")
    if node != ctx.config.node_id and not (ctx.broker.cluster.is_coordinator and ctx.broker.cluster.node(node) is not None):
        raise KafkaError(
            Errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.config.node_id}, but received {name}",
        )


def save_broker_configs(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    ctx.broker.set_broker_configs(name, configs, validate_only=validate_only)
    if not validate_only:
        log.info("broker configs of %s now %s (client %s)", name or "the cluster default", configs, ctx.client_id)


def check_topic_resource(name: str) -> None:
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    validate_topic_name(name)


def save_topic_configs(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    """Kafka's controller order: name, then the configs (INVALID_CONFIG), then existence."""
    check_topic_resource(name)
    ctx.broker.validate_topic_configs(configs)
    if name not in ctx.broker.topics:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    ctx.broker.set_topic_configs(name, configs, validate_only=validate_only)
    if not validate_only:
        log.info("topic %s configs now %s (client %s)", name, configs, ctx.client_id)


def _response(
    resource: AlterConfigsResource, error: Errors, message: str | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=int(error),
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
