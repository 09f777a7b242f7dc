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
is not a number, is INVALID_REQUEST. GROUP resources: the configs sent become the group's
(``broker/group_configs.py``). Other resource types are INVALID_REQUEST ("Unknown resource type
N"). Success answers a null message.

Not implemented: alter-config policies, CLIENT_METRICS.
"""

from __future__ import annotations

from rivven_kproto.codec.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from rivven_kproto.server.context import RequestContext

from ..routes import CONTROLLER
from ._config_alters import alter_each, check_nulls

API_KEY = AlterConfigsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer


def handle(ctx: RequestContext, request: AlterConfigsRequest, version: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=alter_each(
        ctx, API_KEY, request.resources, request.validate_only, _check, _new_configs, AlterConfigsResourceResponse,
    ))


def _check(resource: AlterConfigsResource) -> None:
    check_nulls([config.name for config in resource.configs if config.value is None])


def _new_configs(ctx: RequestContext, resource: AlterConfigsResource) -> dict[str, str]:
    """The configs sent are the level's new configs: what is not sent is removed."""
    return {config.name: config.value or "" for config in resource.configs}
