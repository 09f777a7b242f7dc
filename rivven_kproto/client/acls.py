"""CreateAcls, DescribeAcls and DeleteAcls for ``kproto acls`` (codes are Kafka's, as in the broker)."""

from __future__ import annotations

from dataclasses import dataclass

from rivven_kproto.codec.acls import AclEntry
from rivven_kproto.codec.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from rivven_kproto.codec.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest, DeleteAclsResponse
from rivven_kproto.codec.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from rivven_kproto.net.errors import check

from .client import KafkaClient

RESOURCE_TYPES = {"any": 1, "topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
PATTERN_TYPES = {"any": 1, "match": 2, "literal": 3, "prefixed": 4}
OPERATIONS = {
    "any": 1, "all": 2, "read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7, "describe": 8,
    "cluster-action": 9, "describe-configs": 10, "alter-configs": 11, "idempotent-write": 12,
}
PERMISSIONS = {"any": 1, "deny": 2, "allow": 3}


def name_of(table: dict[str, int], code: int) -> str:
    return next((name for name, value in table.items() if value == code), str(code))


@dataclass(frozen=True)
class Acl(AclEntry):
    """An ACL as the CLI shows it."""

    def as_json(self) -> dict[str, str | None]:
        return {
            "resource_type": name_of(RESOURCE_TYPES, self.resource_type), "resource_name": self.resource_name,
            "pattern_type": name_of(PATTERN_TYPES, self.pattern_type), "principal": self.principal,
            "host": self.host, "operation": name_of(OPERATIONS, self.operation),
            "permission": name_of(PERMISSIONS, self.permission),
        }


async def create_acls(client: KafkaClient, acls: list[Acl]) -> None:
    def build(version: int) -> CreateAclsRequest:
        return CreateAclsRequest(creations=[
            AclCreation(resource_type=a.resource_type, resource_name=a.resource_name or "", resource_pattern_type=a.pattern_type,
                        principal=a.principal or "", host=a.host or "*", operation=a.operation, permission_type=a.permission)
            for a in acls
        ])

    response = await client.call(CreateAclsRequest, build, CreateAclsResponse, min_version=1)
    for result in response.results:
        check(result.error_code, result.error_message, context="CreateAcls")


async def describe_acls(client: KafkaClient, selection: Acl) -> list[Acl]:
    def build(version: int) -> DescribeAclsRequest:
        return DescribeAclsRequest(
            resource_type_filter=selection.resource_type, resource_name_filter=selection.resource_name,
            pattern_type_filter=selection.pattern_type, principal_filter=selection.principal,
            host_filter=selection.host, operation=selection.operation, permission_type=selection.permission,
        )

    response = await client.call(DescribeAclsRequest, build, DescribeAclsResponse, min_version=1)
    check(response.error_code, response.error_message, context="DescribeAcls")
    return [
        Acl(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in response.resources
        for a in r.acls
    ]


async def delete_acls(client: KafkaClient, selection: Acl) -> list[Acl]:
    def build(version: int) -> DeleteAclsRequest:
        return DeleteAclsRequest(filters=[DeleteAclsFilter(
            resource_type_filter=selection.resource_type, resource_name_filter=selection.resource_name,
            pattern_type_filter=selection.pattern_type, principal_filter=selection.principal,
            host_filter=selection.host, operation=selection.operation, permission_type=selection.permission,
        )])

    response = await client.call(DeleteAclsRequest, build, DeleteAclsResponse, min_version=1)
    removed = []
    for result in response.filter_results:
        check(result.error_code, result.error_message, context="DeleteAcls")
        removed += [
            Acl(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)
            for m in result.matching_acls
        ]
    return removed
