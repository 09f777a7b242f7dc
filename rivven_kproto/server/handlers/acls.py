"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), v1-3, with Kafka's answers.

Without an authorizer every one answers SECURITY_DISABLED. Creating or deleting needs Alter on
the Cluster, describing needs Describe on the Cluster (CLUSTER_AUTHORIZATION_FAILED otherwise).
An invalid binding or filter is INVALID_REQUEST with Kafka's reason; a change is durable before
it is answered and applies to the next request of every connection. Every request that changes
ACLs leaves one INFO line: who changed them and the bindings created or deleted (as SCRAM
credential changes do), so that the log answers "who granted this".
"""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from collections.abc import Iterable

from rivven_kproto.broker.security.acls import (
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from rivven_kproto.codec.messages.delete_acls import (
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from rivven_kproto.codec.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

from ..context import RequestContext

log = logging.getLogger(__name__)

DISABLED = "No Authorizer is configured on the broker"
NOT_CONTROLLER = "This broker is not the controller (brokers sharing a store: send ACL changes to the controller)"


def create(ctx: RequestContext, request: CreateAclsRequest, version: int) -> CreateAclsResponse:
    def result(error: Errors, message: str | None = None) -> AclCreationResult:
        return AclCreationResult(error_code=error, error_message=message)

    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return CreateAclsResponse(throttle_time_ms=0, results=[result(Errors.SECURITY_DISABLED, DISABLED)] * len(request.creations))
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER):
        return CreateAclsResponse(throttle_time_ms=0, results=[result(Errors.CLUSTER_AUTHORIZATION_FAILED)] * len(request.creations))
    if not ctx.broker.cluster.is_coordinator:  # one writer of the shared ACLs: the controller
        return CreateAclsResponse(throttle_time_ms=0, results=[result(Errors.NOT_CONTROLLER, NOT_CONTROLLER)] * len(request.creations))
    results, valid = [], []
    for creation in request.creations:
        binding = AclBinding(
            creation.resource_type, creation.resource_name, creation.resource_pattern_type, creation.principal,
            creation.host, creation.operation, creation.permission_type,
        )
        try:
            binding.validate()
        except AclError as exc:
            results.append(result(Errors.INVALID_REQUEST, str(exc)))
            continue
        valid.append(binding)
        results.append(result(Errors.NONE))
    authorizer.create(valid)
    if valid:
        log.info("ACLs created by %s: %s", ctx.principal, describe_bindings(valid))
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def describe_bindings(bindings: Iterable[AclBinding]) -> str:
    """Bindings as Kafka's ``AclBinding.toString`` spells them, comma-separated."""
    return ", ".join(
        f"(pattern=ResourcePattern(resourceType={_name(ResourceType, b.resource_type)}, name={b.resource_name}, "
        f"patternType={_name(PatternType, b.pattern_type)}), entry=(principal={b.principal}, host={b.host}, "
        f"operation={_name(Operation, b.operation)}, permissionType={_name(Permission, b.permission)}))"
        for b in bindings
    )


def _name(kind: type[enum.IntEnum], value: int) -> str:
    try:
        return kind(value).name
    except ValueError:
        return str(value)


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(
        f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter, f.host_filter,
        f.operation, f.permission_type,
    )


def _check_filter(acl_filter: AclFilter) -> None:
    if acl_filter.resource_type == ResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        raise AclError("Invalid resource or pattern type in the filter")
    if acl_filter.operation == Operation.UNKNOWN or acl_filter.permission == 0:
        raise AclError("Invalid operation or permission type in the filter")


def describe(ctx: RequestContext, request: DescribeAclsRequest, version: int) -> DescribeAclsResponse:
    def answer(error: Errors, message: str | None = None, resources: list[DescribeAclsResource] | None = None) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=error, error_message=message, resources=resources or [])

    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return answer(Errors.SECURITY_DISABLED, DISABLED)
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER):
        return answer(Errors.CLUSTER_AUTHORIZATION_FAILED)
    acl_filter = _filter(request)
    try:
        _check_filter(acl_filter)
    except AclError as exc:
        return answer(Errors.INVALID_REQUEST, str(exc))
    grouped: dict[tuple[int, str, int], list[AclDescription]] = defaultdict(list)
    for acl in authorizer.describe(acl_filter):
        grouped[(acl.resource_type, acl.resource_name, acl.pattern_type)].append(
            AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation, permission_type=acl.permission)
        )
    resources = [
        DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in sorted(grouped.items())
    ]
    return answer(Errors.NONE, None, resources)


def delete(ctx: RequestContext, request: DeleteAclsRequest, version: int) -> DeleteAclsResponse:
    def failed(error: Errors, message: str | None = None) -> DeleteAclsFilterResult:
        return DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=[])

    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[failed(Errors.SECURITY_DISABLED, DISABLED)] * len(request.filters))
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[failed(Errors.CLUSTER_AUTHORIZATION_FAILED)] * len(request.filters))
    if not ctx.broker.cluster.is_coordinator:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[failed(Errors.NOT_CONTROLLER, NOT_CONTROLLER)] * len(request.filters))
    filters: list[AclFilter] = []
    results: list[DeleteAclsFilterResult | None] = []
    for raw in request.filters:
        acl_filter = _filter(raw)
        try:
            _check_filter(acl_filter)
        except AclError as exc:
            results.append(failed(Errors.INVALID_REQUEST, str(exc)))
            continue
        filters.append(acl_filter)
        results.append(None)
    removed_per_filter = authorizer.delete(filters)
    every_removed = list(dict.fromkeys(acl for acls in removed_per_filter for acl in acls))  # once, if two filters match
    if every_removed:
        log.info("ACLs deleted by %s: %s", ctx.principal, describe_bindings(every_removed))
    removed = iter(removed_per_filter)
    final = []
    for entry in results:
        if entry is not None:
            final.append(entry)
            continue
        matching = [
            DeleteAclsMatchingAcl(
                error_code=Errors.NONE, error_message=None, resource_type=a.resource_type, resource_name=a.resource_name,
                pattern_type=a.pattern_type, principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission,
            )
            for a in next(removed)
        ]
        final.append(DeleteAclsFilterResult(error_code=Errors.NONE, error_message=None, matching_acls=matching))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=final)
