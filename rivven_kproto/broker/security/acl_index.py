"""The ACLs indexed by principal and resource, so a decision looks at only the ACLs that can
match (issue #37 item 5).

As Kafka's StandardAuthorizer, within a principal's ACLs: LITERAL ones (the ``*`` wildcard among
them) are found by a dict lookup on (resource type, name); PREFIXED ones are kept in a sorted list
per resource type, and the prefixes of a name are found by bisecting, jumping over every run of
entries that cannot be a prefix. A decision looks up the principal and ``User:*`` only, so other
users' ACLs cost it nothing; whether any ACL at all matches a resource (for
``allow.everyone.if.no.acl.found``) is a separate index over everyone's. Before, every decision
scanned every ACL: one Metadata request naming 24,000 topics held the event loop for seconds.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Protocol

from rivven_kproto.codec.acls import Operation, PatternType, Permission


class AclBinding(Protocol):
    """What the index reads of an ACL (``acls.AclBinding``; a protocol: acls.py imports this module)."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission(self) -> int: ...

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# (operation, permission, host): what a decision needs of an ACL once its resource and principal match.
IndexedAcl = tuple[int, int, str]
# (operation, permission, host, pattern type, resource name).
TypedAcl = tuple[int, int, str, int, str]


class ResourceIndex:
    """Some ACLs by resource pattern."""

    def __init__(self) -> None:
        self.literal: dict[tuple[int, str], list[IndexedAcl]] = {}
        self.prefixed: dict[tuple[int, str], list[IndexedAcl]] = {}
        self.prefixes: dict[int, list[str]] = {}

    def add(self, acl: AclBinding) -> None:
        table = self.prefixed if acl.pattern_type == PatternType.PREFIXED else self.literal
        entry = (int(acl.operation), int(acl.permission), acl.host)
        table.setdefault((int(acl.resource_type), acl.resource_name), []).append(entry)

    def seal(self) -> None:
        for resource_type, name in self.prefixed:
            self.prefixes.setdefault(resource_type, []).append(name)
        for names in self.prefixes.values():
            names.sort()

    def matching(self, resource_type: int, name: str) -> list[list[IndexedAcl]]:
        """The ACLs of every pattern that matches the name: literal, wildcard, each prefix of it."""
        found = []
        entries = self.literal.get((resource_type, name))
        if entries is not None:
            found.append(entries)
        if name != WILDCARD:
            entries = self.literal.get((resource_type, WILDCARD))
            if entries is not None:
                found.append(entries)
        prefixes = self.prefixes.get(resource_type)
        if prefixes:
            found.extend(self.prefixed[(resource_type, prefix)] for prefix in _prefixes_of(prefixes, name))
        return found


class AclIndex:
    """Immutable: built from the whole ACL list (a change rebuilds it, which is rare)."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        self.by_principal: dict[str, ResourceIndex] = {}
        self.everyone = ResourceIndex()
        # Every ACL by (principal, resource type), patterns kept: Kafka's "the operation on some
        # resource of the type" check (``allowed_on_some``).
        self.by_type: dict[tuple[str, int], list[TypedAcl]] = {}
        for acl in acls:
            self.by_principal.setdefault(acl.principal, ResourceIndex()).add(acl)
            self.everyone.add(acl)
            self.by_type.setdefault((acl.principal, int(acl.resource_type)), []).append(
                (int(acl.operation), int(acl.permission), acl.host, int(acl.pattern_type), acl.resource_name))
        for index in (*self.by_principal.values(), self.everyone):
            index.seal()

    def decide(self, principal: str, host: str, operation: Operation, resource_type: int, name: str) -> bool | None:
        """Among the ACLs of this principal (or ``User:*``) and host whose pattern matches: a DENY
        of the operation or ALL wins (False); then an ALLOW of the operation, ALL, or an operation
        implying it (True). None: neither (``allow.everyone.if.no.acl.found`` is the caller's)."""
        own = self.by_principal.get(principal)
        anyone = self.by_principal.get(WILDCARD_PRINCIPAL) if principal != WILDCARD_PRINCIPAL else None
        if own is None and anyone is None:  # the common case for a stranger: one lookup
            return None
        asked = int(operation)
        allowing = _IMPLIED_BY.get(asked) or (asked, _ALL)
        allowed = False
        for index in (own, anyone):
            if index is None:
                continue
            for entries in index.matching(resource_type, name):
                for acl_operation, permission, acl_host in entries:
                    if acl_host != host and acl_host != WILDCARD:
                        continue
                    if permission == _DENY:
                        if acl_operation == asked or acl_operation == _ALL:
                            return False
                    elif acl_operation in allowing:
                        allowed = True
        return True if allowed else None

    def allowed_on_some(self, principal: str, host: str, operation: Operation, resource_type: int) -> bool:
        """Kafka's rule for "the operation on some resource of this type", over the ACLs of this
        principal (or ``User:*``) and host for the operation or ALL: a literal DENY of ``*``
        refuses; a literal ALLOW of ``*`` allows; else some other ALLOW must stand, not cancelled
        by a literal DENY of the same name (literal ALLOWs only) nor by a prefixed DENY of a
        prefix of its name."""
        asked = int(operation)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allowing: list[tuple[bool, str]] = []  # (literal, name)
        anything = False
        who = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        for someone in who:
            for acl_operation, permission, acl_host, pattern, name in self.by_type.get((someone, resource_type), ()):
                if (acl_host != host and acl_host != WILDCARD) or (acl_operation != asked and acl_operation != _ALL):
                    continue
                literal = pattern != _PREFIXED
                if permission == _DENY:
                    if literal and name == WILDCARD:
                        return False
                    (deny_literal if literal else deny_prefixed).add(name)
                elif literal and name == WILDCARD:
                    anything = True
                else:
                    allowing.append((literal, name))
        if anything:
            return True
        return any(not (literal and name in deny_literal)
                   and not any(name[:end] in deny_prefixed for end in range(1, len(name) + 1))
                   for literal, name in allowing)

    def any_matches(self, resource_type: int, name: str) -> bool:
        """Whether any ACL, of anyone, applies to the resource."""
        return bool(self.everyone.matching(resource_type, name))


def _prefixes_of(prefixes: list[str], name: str) -> list[str]:
    """The entries of the sorted ``prefixes`` that ``name`` starts with.

    Every prefix of ``name`` sorts at or below it, so the walk goes down from ``name``: an entry
    that is a prefix is taken and the search continues below it with that prefix shortened by
    one; an entry that is not narrows the search to the part it shares with ``name``. Each step
    shortens the bound, so a check costs a few bisections, not a scan.
    """
    found = []
    bound = name
    high = bisect_right(prefixes, bound)
    while high > 0:
        candidate = prefixes[high - 1]
        if name.startswith(candidate):
            found.append(candidate)
            if not candidate:
                break
            bound = candidate[:-1]
        else:
            bound = name[:_common_length(candidate, name)]
        high = bisect_right(prefixes, bound, 0, high - 1)
    return found


def _common_length(a: str, b: str) -> int:
    size = min(len(a), len(b))
    for i in range(size):
        if a[i] != b[i]:
            return i
    return size


# Plain ints: enum member lookups cost more than the rest of a decision.
_ALL = int(Operation.ALL)
_DENY = int(Permission.DENY)
_PREFIXED = int(PatternType.PREFIXED)
_IMPLIED_BY: dict[int, tuple[int, ...]] = {
    int(Operation.DESCRIBE): tuple(int(op) for op in (Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                                      Operation.DELETE, Operation.ALTER, Operation.ALL)),
    int(Operation.DESCRIBE_CONFIGS): (int(Operation.DESCRIBE_CONFIGS), int(Operation.ALTER_CONFIGS), _ALL),
}
