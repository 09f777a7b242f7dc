"""The indexed authorizer decides exactly as the linear scan it replaced (issue #37 item 5).

The reference below is the former ``Authorizer.authorize`` kept verbatim in spirit: every ACL is
looked at. Hypothesis draws ACL sets and queries over a small alphabet so that literal, wildcard
and prefix matches, principals, hosts and implied operations collide often.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.security.acls import (
    WILDCARD,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
}
SUPER = "User:admin"
OPERATIONS = [op for op in Operation if op not in (Operation.ANY, Operation.UNKNOWN)]


def linear_authorize(acls: list[AclBinding], allow_if_no_acl: bool, principal: str, host: str,
                     operation: Operation, resource_type: ResourceType, name: str) -> bool:
    """The reference: the scan over every ACL the index replaced."""
    if principal == SUPER:
        return True
    matching = [acl for acl in acls if acl.resource_matches(resource_type, name)
                and acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)]
    allowed_ops = IMPLIED_BY.get(operation, {operation}) | {Operation.ALL}
    if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in matching):
        return False
    if any(acl.permission == Permission.ALLOW and acl.operation in allowed_ops for acl in matching):
        return True
    if allow_if_no_acl:
        return not any(acl.resource_matches(resource_type, name) for acl in acls)
    return False


def linear_any_topic(acls: list[AclBinding], principal: str, host: str, operation: Operation) -> bool:
    if principal == SUPER:
        return True
    return any(acl.resource_type == ResourceType.TOPIC and acl.permission == Permission.ALLOW
               and acl.operation in (operation, Operation.ALL) and acl.principal in (principal, "User:*")
               and acl.host in (host, WILDCARD) for acl in acls)


names = st.text(alphabet="ab*", min_size=0, max_size=4)
principals = st.sampled_from(["User:alice", "User:bob", "User:*", SUPER])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
resource_types = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER])
bindings = st.builds(
    AclBinding, resource_type=resource_types, resource_name=names,
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]), principal=principals, host=hosts,
    operation=st.sampled_from(OPERATIONS), permission=st.sampled_from([Permission.ALLOW, Permission.DENY]),
)
queries = st.tuples(principals, st.sampled_from(["10.0.0.1", "10.0.0.2"]), st.sampled_from(OPERATIONS),
                    resource_types, names)


@settings(max_examples=400, deadline=None)
@given(acls=st.lists(bindings, max_size=12), allow_if_no_acl=st.booleans(), asked=st.lists(queries, min_size=1, max_size=20))
def test_the_index_decides_as_the_linear_scan(tmp_path_factory: object, acls: list[AclBinding], allow_if_no_acl: bool,
                                                asked: list[tuple[str, str, Operation, ResourceType, str]]) -> None:
    auth = Authorizer(_empty_dir(tmp_path_factory), [SUPER], allow_if_no_acl)
    auth.reload(_stored(acls))
    for principal, host, operation, resource_type, name in asked:
        expected = linear_authorize(acls, allow_if_no_acl, principal, host, operation, resource_type, name)
        assert auth.authorize(principal, host, operation, resource_type, name) == expected, (principal, host, operation, resource_type, name)
        assert auth.authorize_any_topic(principal, host, operation) == linear_any_topic(acls, principal, host, operation)


def test_prefix_walk_finds_every_prefix_among_many(tmp_path: Path) -> None:
    """Nested and sibling prefixes: the bisection must not stop at the first non-prefix."""
    acls = [AclBinding(ResourceType.TOPIC, prefix, PatternType.PREFIXED, "User:alice", "*", Operation.READ, Permission.ALLOW)
            for prefix in ("a", "ab", "abz", "ab0", "abc-1", "b")]
    acls.append(AclBinding(ResourceType.TOPIC, "a", PatternType.PREFIXED, "User:alice", "*", Operation.READ, Permission.DENY))
    auth = Authorizer(tmp_path, [], False)
    auth.reload(_stored(acls))
    assert not auth.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "abc-12")  # the DENY on "a"
    assert auth.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "b")


def _stored(acls: list[AclBinding]) -> bytes:
    import json
    from dataclasses import asdict
    return json.dumps([asdict(acl) for acl in acls]).encode()


def _empty_dir(factory: object) -> Path:
    return factory.mktemp("acls")  # type: ignore[attr-defined, no-any-return]
