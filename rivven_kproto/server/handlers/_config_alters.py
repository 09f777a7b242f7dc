"""What AlterConfigs and IncrementalAlterConfigs share: the walk over the resources, Kafka 3.9's
order of checks, and saving a topic's or a broker level's configs.

Per resource, each answered on its own: a resource named twice is INVALID_REQUEST for both, a key
given twice INVALID_REQUEST, then the API's own checks (null values, operations), the
authorization table's row, then by type: BROKER (this node's id or "" for the cluster default),
TOPIC (name, configs, existence, in the controller's order), GROUP (a non-empty name, the group
configs of ``broker/group_configs.py``; the group need not exist), anything else INVALID_REQUEST. The two
APIs differ only in their own checks and in how the request makes the new configs of a resource.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from rivven_kproto.broker.topics import validate_topic_name
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.server.context import RequestContext

from .describe_configs import BROKER, GROUP, TOPIC, broker_id, check_config_access, check_group_resource

log = logging.getLogger(__name__)


class _Config(Protocol):
    @property
    def name(self) -> str: ...


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def configs(self) -> Sequence[_Config]: ...


ResourceT = TypeVar("ResourceT", bound=_Resource)
ResponseT = TypeVar("ResponseT")


def alter_each(ctx: RequestContext, api_key: int, resources: Sequence[ResourceT], validate_only: bool,
               check: Callable[[ResourceT], None], new_configs: Callable[[RequestContext, ResourceT], dict[str, str]],
               response: Callable[..., ResponseT]) -> list[ResponseT]:
    """Each resource's answer: ``check`` raises the API's own request errors, ``new_configs`` makes
    the configs the resource's level (a topic's overrides, a broker level) is to have."""
    duplicates = duplicate_resources(resources)
    responses = []
    for resource in resources:
        error, message = Errors.NONE, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise KafkaError(Errors.INVALID_REQUEST, "Each resource must appear at most once.")
            check_config_names([config.name for config in resource.configs])
            check(resource)
            _alter(ctx, api_key, resource, validate_only, new_configs)
        except KafkaError as exc:
            error, message = exc.error, exc.message
        responses.append(response(error_code=int(error), error_message=message,
                                  resource_type=resource.resource_type, resource_name=resource.resource_name))
    return responses


def _alter(ctx: RequestContext, api_key: int, resource: ResourceT, validate_only: bool,
           new_configs: Callable[[RequestContext, ResourceT], dict[str, str]]) -> None:
    check_config_access(ctx, api_key, resource.resource_type, resource.resource_name)
    if resource.resource_type == BROKER:
        check_broker_resource(ctx, resource.resource_name)
        save_broker_configs(ctx, resource.resource_name, new_configs(ctx, resource), validate_only)
    elif resource.resource_type == TOPIC:
        save_topic_configs(ctx, resource.resource_name, new_configs(ctx, resource), validate_only)
    elif resource.resource_type == GROUP:
        check_group_resource(resource.resource_name)
        save_group_configs(ctx, resource.resource_name, new_configs(ctx, resource), validate_only)
    else:
        raise KafkaError(Errors.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


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


def save_group_configs(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    """A group's configs become ``configs`` (Kafka's GroupConfig checks, INVALID_CONFIG); the
    controller writes them, the other brokers follow at their heartbeat."""
    ctx.broker.check_controller()
    if validate_only:
        ctx.broker.group_configs.check(configs)
        return
    ctx.broker.group_configs.replace(name, configs)
    log.info("group %s configs now %s (client %s)", name, configs, ctx.client_id)
