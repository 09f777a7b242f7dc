"""ListConfigResources (key 74), versions 0-1: the resources DescribeConfigs can be asked about
(KIP-1142, Kafka 4.1; v0 was KIP-1000's ListClientMetricsResources).

As Kafka 4.1's broker: Describe-Configs on the Cluster is required (else the whole answer is
CLUSTER_AUTHORIZATION_FAILED); v0 lists client-metrics resources only; v1 lists the types asked
for, or every type it supports when none is given (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS,
GROUP), and a type outside those fails the request with UNSUPPORTED_VERSION. Topics are every
topic, brokers every live broker (by node id), groups every group with configs set.

Not implemented, so listed empty: client-metrics subscriptions (this broker keeps none) and broker
loggers (DescribeConfigs does not serve BROKER_LOGGER here).
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.enums import ConfigResourceType
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = ListConfigResourcesRequest.API_KEY
ROUTE = LOCAL
RULE = rule(API_KEY)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = (
    ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
    ConfigResourceType.CLIENT_METRICS, ConfigResourceType.GROUP)
SUPPORTED_V1 = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def handle(ctx: RequestContext, request: ListConfigResourcesRequest, version: int) -> ListConfigResourcesResponse:
    (check,) = RULE.applying(version)
    if not ctx.permits(check):
        return _answer(check.error or Errors.NONE, [])
    supported = SUPPORTED_V1 if version >= 1 else (CLIENT_METRICS,)
    wanted = set(request.resource_types) or set(supported)
    if not wanted <= set(supported):
        return _answer(Errors.UNSUPPORTED_VERSION, [])
    listed: list[ConfigResource] = []
    if BROKER in wanted:
        listed += [ConfigResource(resource_name=str(node), resource_type=BROKER)
                   for node in sorted(ctx.broker.cluster.node_ids)]
    if TOPIC in wanted:
        listed += [ConfigResource(resource_name=name, resource_type=TOPIC) for name in sorted(ctx.broker.topics)]
    if GROUP in wanted:
        listed += [ConfigResource(resource_name=name, resource_type=GROUP) for name in sorted(ctx.broker.group_configs.groups)]
    return _answer(Errors.NONE, listed)


def _answer(error: Errors, resources: list[ConfigResource]) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(error), config_resources=resources)
