"""Kafka's ACL model and authorizer decision, pure: resources, patterns, operations, principals.

The rules are Kafka's StandardAuthorizer's: super users may do anything; a DENY that matches wins;
otherwise an ALLOW for the operation, ``All``, or an operation that implies it (Read, Write,
Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs) allows; a resource no ACL
matches at all is allowed only with ``allow.everyone.if.no.acl.found``. ACLs match a resource by
LITERAL name, the LITERAL ``*`` wildcard, or a PREFIXED name; a principal by ``User:name`` or
``User:*``; a host by address or ``*``. ACLs are kept in ``<data_dir>/meta/acls.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from rivven_kproto.broker.durable.work import BlockingWork, Document
from rivven_kproto.broker.security.acl_index import AclIndex
from rivven_kproto.codec.acls import AclEntry, Operation, PatternType, Permission, ResourceType

__all__ = ["AclBinding", "AclEntry", "AclError", "AclFilter", "Authorizer", "Operation", "PatternType", "Permission", "ResourceType"]

WILDCARD = "*"
FILE_NAME = "acls.json"


CLUSTER_NAME = "kafka-cluster"
DECISIONS_KEPT = 16_384  # remembered authorizer decisions, at most (per ACL version)
# The topic Kafka asks about first when the question is "the operation on any topic".
PROBE_TOPIC = "hardcode"


class AclError(ValueError):
    """An ACL or filter Kafka would refuse (INVALID_REQUEST), with Kafka's reason."""


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def validate(self) -> None:
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or self.resource_type not in ResourceType.__members__.values():
            raise AclError("Invalid resource type")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError("Invalid pattern type")
        if self.operation in (Operation.ANY, Operation.UNKNOWN) or self.operation not in Operation.__members__.values():
            raise AclError("Invalid operation")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError("Invalid permission type")
        if not self.resource_name:
            raise AclError("Resource name should not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError("The only valid name for the CLUSTER resource is kafka-cluster")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"Could not parse principal from `{self.principal}` (no colon is present separating the principal type from the principal name)")
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            raise AclError("Resource pattern type PREFIXED with the wildcard name is invalid")

    def resource_matches(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter(AclEntry):
    """KIP-140 filters: ANY matches anything; MATCH matches the ACLs that would apply to the name."""

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return self.resource_name.startswith(acl.resource_name)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


class Authorizer:
    """Decisions over the stored ACLs; a change is durable before it is answered."""

    def __init__(self, meta_dir: Path | Document, super_users: Iterable[str], allow_if_no_acl: bool,
                 work: BlockingWork | None = None) -> None:
        self.document = meta_dir if isinstance(meta_dir, Document) else Document(meta_dir / FILE_NAME)
        self.path = self.document.path
        self.work = work
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: list[AclBinding] = []
        self.index = AclIndex(())
        self.reload(self.document.read())

    def reload(self, stored: bytes | None) -> None:
        """Take the ACLs as stored (at start, and on a broker following the controller, which
        changed them: an ACL deleted there stops allowing here)."""
        self._take([AclBinding(**entry) for entry in json.loads(stored)] if stored is not None else [])

    def _take(self, acls: list[AclBinding]) -> None:
        self.index = AclIndex(acls)
        self.acls = acls
        # Decisions made from this index (a change of the ACLs builds a new one, and a new cache).
        self.decided: dict[tuple[str, str, int, int, str], bool] = {}

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Kafka's decision, from the ACLs indexed by resource (see ``acl_index``), remembered:
        the same few questions come with every Produce and transaction (the 1,000-ACL bench of
        issue #37). The memory is bounded: it starts afresh past ``DECISIONS_KEPT`` entries."""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        decided = self.decided
        decision = decided.get(key)
        if decision is None:
            if len(decided) >= DECISIONS_KEPT:
                decided.clear()
            decision = decided[key] = self._decide(principal, host, operation, resource_type, name)
        return decision

    def _decide(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        decision = self.index.decide(principal, host, operation, resource_type, name)
        if decision is not None:
            return decision
        return self.allow_if_no_acl and not self.index.any_matches(resource_type, name)

    def authorize_any_topic(self, principal: str, host: str, operation: Operation) -> bool:
        """Kafka's ``authorizeByResourceType`` for topics (an idempotent producer's check, Write on
        some topic): the operation allowed on a topic nobody names (a super user, a wildcard or
        prefix ALLOW, ``allow.everyone.if.no.acl.found``), else an ALLOW of it on some topic
        pattern that no DENY covers (see ``AclIndex.allowed_on_some``). A DENY counts: before,
        any ALLOW on a topic was enough, even one a DENY cancelled (issue #37 item 9)."""
        if self.authorize(principal, host, operation, ResourceType.TOPIC, PROBE_TOPIC):
            return True
        return self.index.allowed_on_some(principal, host, operation, ResourceType.TOPIC)

    def create(self, bindings: list[AclBinding]) -> None:
        held = set(self.acls)
        new = [b for b in dict.fromkeys(bindings) if b not in held]  # a set: 1,000 ACLs took 1.6 s
        if new:
            self._save(self.acls + new)

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        removed = [[acl for acl in self.acls if f.matches(acl)] for f in filters]
        gone = {acl for group in removed for acl in group}
        if gone:
            self._save([acl for acl in self.acls if acl not in gone])
        return removed

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    def _save(self, acls: list[AclBinding]) -> None:
        """Take effect now; durable before the change is answered (a critical job of ``work``)."""
        self.document.save(self.work, json.dumps([asdict(acl) for acl in acls], indent=1).encode())
        self._take(acls)
