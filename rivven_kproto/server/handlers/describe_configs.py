"""DescribeConfigs (key 32), versions 1-4: topic configs and the broker's own settings.

TOPIC (2): every topic config we know (Kafka 3.9's topic config set), or only the requested keys
(unknown keys are silently left out, as Kafka does); the source is DYNAMIC_TOPIC_CONFIG for an
override, STATIC_BROKER_CONFIG where the broker's configuration sets the synonym
(log.segment.bytes, ...), else DEFAULT_CONFIG; ``include_synonyms`` adds Kafka's chain (override,
static broker setting, default); v3+ answers the config type, documentation is null. An illegal
name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.

BROKER (4): named by this node's id, the broker settings we honour; the log defaults are dynamic
(sourced DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or
DEFAULT_CONFIG, the first of the chain), the rest read-only. The empty name answers the
cluster-wide dynamic defaults that are set. Another id, or a name that is not a number, is
INVALID_REQUEST with Kafka's message.

GROUP (32): a group's configs (``broker/group_configs.py``), every Kafka 4.2 group key: GROUP_CONFIG
where the group sets it, DEFAULT_CONFIG (the broker's value) otherwise; the group need not exist;
the empty name is INVALID_REQUEST.

A resource type Kafka does not know fails the whole request with INVALID_REQUEST (Kafka's
behaviour); BROKER_LOGGER (8) and CLIENT_METRICS (16) are INVALID_REQUEST per resource.

DescribeConfigs on the topic, on the group, or on the Cluster for brokers (the authorization table).
Not implemented: config documentation, BROKER_LOGGER and CLIENT_METRICS resources.
"""

from __future__ import annotations

from rivven_kproto.broker.security.acls import CLUSTER_NAME, ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.topics import ConfigEntry, validate_topic_name
from rivven_kproto.codec.enums import ConfigResourceType
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from rivven_kproto.server.context import RequestContext

from ..routes import LOCAL

API_KEY = DescribeConfigsRequest.API_KEY
ROUTE = LOCAL

TOPIC, BROKER, GROUP = ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.GROUP
# The authorization table's rows, by resource type.
RULE_LABELS: dict[int, str] = {TOPIC: "topic", BROKER: "broker", GROUP: "group"}
# The types this request may name (others fail the whole request, as in Kafka).
RESOURCE_TYPE_NAMES: dict[int, str] = {kind: kind.name for kind in (
    TOPIC, BROKER, ConfigResourceType.BROKER_LOGGER, ConfigResourceType.CLIENT_METRICS, GROUP)}
# The resource types whose name is checked against ACLs (the others' rows are on the Cluster).
NAMED_RESOURCES = {ResourceType.TOPIC, ResourceType.GROUP}


def handle(ctx: RequestContext, request: DescribeConfigsRequest, version: int) -> DescribeConfigsResponse:
    if any(resource.resource_type not in RESOURCE_TYPE_NAMES for resource in request.resources):
        # Kafka throws while sorting resources for authorization: the whole request fails.
        return DescribeConfigsResponse(
            results=[
                _error(r, Errors.INVALID_REQUEST, Errors.INVALID_REQUEST.message) for r in request.resources
            ]
        )
    results = []
    for resource in request.resources:
        try:
            entries = _describe(ctx, resource)
        except KafkaError as exc:
            results.append(_error(resource, exc.error, exc.message))
            continue
        if resource.configuration_keys:
            wanted = set(resource.configuration_keys)
            entries = [entry for entry in entries if entry.name in wanted]
        results.append(
            DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_config(entry, request.include_synonyms, version) for entry in entries],
            )
        )
    return DescribeConfigsResponse(results=results)


def check_config_access(ctx: RequestContext, api_key: int, resource_type: int, name: str) -> None:
    """The API's row of the authorization table: DescribeConfigs/AlterConfigs on the topic, or on
    the Cluster for broker resources."""
    label = RULE_LABELS.get(resource_type)
    if label is None:
        return
    check = rule(api_key).check(label)
    refused = ctx.refusal(check, name if check.resource_type in NAMED_RESOURCES else CLUSTER_NAME)
    if refused is not None:
        raise KafkaError(refused, "Authorization failed.")


def _describe(ctx: RequestContext, resource: DescribeConfigsResource) -> list[ConfigEntry]:
    name = resource.resource_name
    check_config_access(ctx, API_KEY, resource.resource_type, name)
    if resource.resource_type == TOPIC:
        validate_topic_name(name)
        if name not in ctx.broker.topics:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return ctx.broker.describe_topic_configs(name)
    if resource.resource_type == BROKER:
        if not name:
            return ctx.broker.describe_cluster_default_configs()
        node_id = broker_id(name, "Broker id")
        if node_id != ctx.config.node_id:
            raise KafkaError(
                Errors.INVALID_REQUEST,
                f"Unexpected broker id, expected {ctx.config.node_id} or empty string, but received {name}",
            )
        return ctx.broker.describe_broker_configs()
    if resource.resource_type == GROUP:
        check_group_resource(name, "Group name must not be empty")
        return ctx.broker.group_configs.describe(name)
    raise KafkaError(
        Errors.INVALID_REQUEST, f"Unsupported resource type: {RESOURCE_TYPE_NAMES[resource.resource_type]}"
    )


def check_group_resource(name: str, empty: str = "Default group resources are not allowed.") -> None:
    """A group resource names one group: the empty name is INVALID_REQUEST (Kafka's messages)."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, empty)


def broker_id(name: str, what: str) -> int:
    """Parse a broker resource name like Java's Integer.parseInt, with Kafka's message on failure."""
    digits = name[1:] if name[:1] in "+-" else name
    if digits.isascii() and digits.isdigit() and -(1 << 31) <= int(name) < (1 << 31):
        return int(name)
    raise KafkaError(Errors.INVALID_REQUEST, f"{what} must be an integer, but it is: {name}")


def _config(entry: ConfigEntry, include_synonyms: bool, version: int) -> DescribeConfigsResourceResult:
    result = DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.sensitive,
        synonyms=[
            DescribeConfigsSynonym(name=synonym.name, value=synonym.value, source=int(synonym.source))
            for synonym in entry.synonyms
        ]
        if include_synonyms
        else [],
    )
    if version >= 3:
        result.config_type = int(entry.config_type)
        result.documentation = None
    return result


def _error(resource: DescribeConfigsResource, error: Errors, message: str | None) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=int(error),
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[],
    )
