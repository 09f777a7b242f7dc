"""The authorizer's decisions and KIP-140 filters, as Kafka's StandardAuthorizer makes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.security.acls import (
    DECISIONS_KEPT,
    AclBinding,
    AclError,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

ALICE = "User:alice"


def acl(name: str, operation: Operation, permission: Permission = Permission.ALLOW, *,
        pattern: PatternType = PatternType.LITERAL, principal: str = ALICE, host: str = "*",
        resource: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def authorizer(tmp_path: Path, *acls: AclBinding, allow_if_no_acl: bool = False) -> Authorizer:
    result = Authorizer(tmp_path, ["User:admin"], allow_if_no_acl)
    result.create(list(acls))
    return result


def allowed(auth: Authorizer, operation: Operation, name: str = "orders", principal: str = ALICE, host: str = "10.0.0.1") -> bool:
    return auth.authorize(principal, host, operation, ResourceType.TOPIC, name)


def test_super_users_and_the_default_deny(tmp_path: Path) -> None:
    auth = authorizer(tmp_path)
    assert allowed(auth, Operation.WRITE, principal="User:admin")
    assert not allowed(auth, Operation.WRITE)
    assert allowed(authorizer(tmp_path / "open", allow_if_no_acl=True), Operation.WRITE)


def test_implied_operations(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl("orders", Operation.WRITE), acl("configs", Operation.ALTER_CONFIGS))
    assert allowed(auth, Operation.WRITE) and allowed(auth, Operation.DESCRIBE)
    assert not allowed(auth, Operation.READ)
    assert allowed(auth, Operation.DESCRIBE_CONFIGS, "configs") and not allowed(auth, Operation.DESCRIBE, "configs")


def test_deny_wins_and_all_covers_everything(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl("orders", Operation.ALL), acl("orders", Operation.DELETE, Permission.DENY))
    assert allowed(auth, Operation.READ) and allowed(auth, Operation.CREATE)
    assert not allowed(auth, Operation.DELETE)


def test_patterns_principals_and_hosts(tmp_path: Path) -> None:
    auth = authorizer(
        tmp_path,
        acl("ord", Operation.READ, pattern=PatternType.PREFIXED),
        acl("*", Operation.DESCRIBE, principal="User:*"),
        acl("payments", Operation.READ, host="10.0.0.2"),
    )
    assert allowed(auth, Operation.READ, "orders") and not allowed(auth, Operation.READ, "payments")
    assert allowed(auth, Operation.DESCRIBE, "anything", principal="User:bob")
    assert allowed(auth, Operation.READ, "payments", host="10.0.0.2")


def test_allow_if_no_acl_applies_only_to_resources_without_acls(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl("orders", Operation.READ, principal="User:bob"), allow_if_no_acl=True)
    assert allowed(auth, Operation.WRITE, "elsewhere")
    assert not allowed(auth, Operation.WRITE, "orders")


def test_filters_any_and_match(tmp_path: Path) -> None:
    literal, prefixed = acl("orders", Operation.READ), acl("ord", Operation.WRITE, pattern=PatternType.PREFIXED)
    auth = authorizer(tmp_path, literal, prefixed)
    every = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert auth.describe(every) == [literal, prefixed]
    match = AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    assert auth.describe(match) == [literal, prefixed]
    exact = AclFilter(ResourceType.TOPIC, "ord", PatternType.PREFIXED, ALICE, None, Operation.WRITE, Permission.ALLOW)
    assert auth.delete([exact]) == [[prefixed]]
    assert Authorizer(tmp_path, [], False).acls == [literal]  # durable: a new instance reads the file


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (acl("orders", Operation.ANY), "Invalid operation"),
        (acl("", Operation.READ), "should not be empty"),
        (acl("x", Operation.READ, principal="alice"), "Could not parse principal"),
        (acl("other", Operation.ALTER, resource=ResourceType.CLUSTER), "kafka-cluster"),
        (acl("*", Operation.READ, pattern=PatternType.PREFIXED), "PREFIXED"),
    ],
)
def test_invalid_bindings_are_refused_with_kafkas_reason(binding: AclBinding, reason: str) -> None:
    with pytest.raises(AclError, match=reason):
        binding.validate()


def test_remembered_decisions_follow_acl_changes_and_stay_bounded(tmp_path: Path) -> None:
    """Decisions are remembered per ACL version: a deleted ALLOW stops allowing at once, and a
    client asking about endless names does not grow the memory past its bound."""
    auth = authorizer(tmp_path, acl("orders", Operation.WRITE))
    assert allowed(auth, Operation.WRITE) and allowed(auth, Operation.WRITE)  # the second from memory
    auth.delete([AclFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL, None, None, Operation.ANY, Permission.ANY)])
    assert not allowed(auth, Operation.WRITE)
    auth.create([acl("orders", Operation.WRITE)])
    assert allowed(auth, Operation.WRITE)
    for i in range(DECISIONS_KEPT + 10):
        allowed(auth, Operation.READ, f"t-{i}")
    assert len(auth.decided) <= DECISIONS_KEPT
