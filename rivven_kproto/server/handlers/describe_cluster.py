"""DescribeCluster (key 60), versions 0-1: cluster id, controller and brokers for admin clients.

The live brokers of the cluster (this one alone on the native log) and its controller (the broker
holding the coordinator lease). We are a broker endpoint: a v1 request for
controllers answers MISMATCHED_ENDPOINT_TYPE and an unknown endpoint type
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST in v0), as Kafka's brokers do.

No authorization check (Kafka makes none); the cluster authorized-operations bitfield, when asked
for, is the client's. Not implemented: racks.
"""

from __future__ import annotations

from rivven_kproto.broker.security.acls import CLUSTER_NAME, ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.acls import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from rivven_kproto.server.context import RequestContext

from ..routes import LOCAL

API_KEY = DescribeClusterRequest.API_KEY
ROUTE = LOCAL
SHOWN = rule(API_KEY).check("cluster_operations")

BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2


def handle(ctx: RequestContext, request: DescribeClusterRequest, version: int) -> DescribeClusterResponse:
    if request.endpoint_type not in (BROKER_ENDPOINT, CONTROLLER_ENDPOINT):
        return _error(
            Errors.INVALID_REQUEST if version == 0 else Errors.UNSUPPORTED_ENDPOINT_TYPE,
            f"Unsupported endpoint type {request.endpoint_type}",
        )
    if request.endpoint_type != BROKER_ENDPOINT:
        return _error(
            Errors.INVALID_REQUEST if version == 0 else Errors.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        )
    operations = OPERATIONS_NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        operations = (ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
                      if ctx.permits(SHOWN) else 0)  # Kafka: only with Describe on the Cluster
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=Errors.NONE,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.cluster.coordinator_id if ctx.broker.cluster.coordinator_id is not None else -1,
        brokers=[DescribeClusterBroker(broker_id=node, host=host, port=port, rack=None)
                 for node, host, port in ctx.brokers()],
        cluster_authorized_operations=operations,
    )


def _error(error: Errors, message: str) -> DescribeClusterResponse:
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=error, error_message=message, endpoint_type=BROKER_ENDPOINT, cluster_id=""
    )
