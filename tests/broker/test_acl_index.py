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


def linear_any_topic(acls: list[AclBinding], allow_if_no_acl: bool, principal: str, host: str,
                     operation: Operation) -> bool:
    """Kafka's ``authorizeByResourceType`` spelled out: the operation allowed on a topic nobody
    names, or an ALLOW (of the operation or All) on some topic pattern that no DENY covers."""
    if linear_authorize(acls, allow_if_no_acl, principal, host, operation, ResourceType.TOPIC, "hardcode"):
        return True
    mine = [acl for acl in acls if acl.resource_type == ResourceType.TOPIC and acl.principal in (principal, "User:*")
            and acl.host in (host, WILDCARD) and acl.operation in (operation, Operation.ALL)]
    denies = [acl for acl in mine if acl.permission == Permission.DENY]
    allows = [acl for acl in mine if acl.permission == Permission.ALLOW]

    def everything(acl: AclBinding) -> bool:
        return acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD

    if any(everything(d) for d in denies):
        return False
    if any(everything(a) for a in allows):
        return True

    def cancelled(allow: AclBinding) -> bool:
        return any(
            (d.pattern_type == allow.pattern_type == PatternType.LITERAL and d.resource_name == allow.resource_name)
            or (d.pattern_type == PatternType.PREFIXED and d.resource_name != ""
                and allow.resource_name.startswith(d.resource_name))
            for d in denies)

    return any(not cancelled(a) for a in allows)


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
        assert auth.authorize_any_topic(principal, host, operation) == linear_any_topic(
            acls, allow_if_no_acl, principal, host, operation)


def test_write_on_some_topic_counts_denies_as_kafka_does(tmp_path: Path) -> None:
    """Issue #37 item 9: an ALLOW that a DENY cancels is no longer "Write on some topic"."""
    def acl(name: str, pattern: PatternType, permission: Permission) -> AclBinding:
        return AclBinding(ResourceType.TOPIC, name, pattern, "User:ivan", "*", Operation.WRITE, permission)

    auth = Authorizer(tmp_path, [], False)
    cases = [
        ([acl("t", PatternType.LITERAL, Permission.ALLOW)], True),
        ([acl("t", PatternType.LITERAL, Permission.ALLOW), acl("t", PatternType.LITERAL, Permission.DENY)], False),
        ([acl("t-1", PatternType.LITERAL, Permission.ALLOW), acl("t-", PatternType.PREFIXED, Permission.DENY)], False),
        ([acl("t-", PatternType.PREFIXED, Permission.ALLOW), acl("t-", PatternType.LITERAL, Permission.DENY)], True),
        ([acl("u", PatternType.LITERAL, Permission.ALLOW), acl("t-", PatternType.PREFIXED, Permission.DENY)], True),
        ([acl("*", PatternType.LITERAL, Permission.ALLOW), acl("t", PatternType.LITERAL, Permission.DENY)], True),
        ([acl("u", PatternType.LITERAL, Permission.ALLOW), acl("*", PatternType.LITERAL, Permission.DENY)], False),
    ]
    for acls, expected in cases:
        auth.reload(_stored(acls))
        assert auth.authorize_any_topic("User:ivan", "10.0.0.1", Operation.WRITE) is expected, acls
    # allow.everyone.if.no.acl.found: a topic no ACL matches could be written, as in Kafka.
    auth = Authorizer(tmp_path, [], True)
    auth.reload(_stored([acl("t", PatternType.LITERAL, Permission.DENY)]))
    assert auth.authorize_any_topic("User:ivan", "10.0.0.1", Operation.WRITE)


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
