"""CreateAcls and DeleteAcls leave one INFO line per change: who made it and what (#37 item 13),
as SCRAM credential changes do; a request that changes nothing leaves none."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.acls import Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.messages.create_acls import AclCreation, CreateAclsRequest
from rivven_kproto.codec.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import acls

NOW = 1_700_000_000_000
LOGGER = "rivven_kproto.server.handlers.acls"


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[RequestContext]:
    config = BrokerConfig(data_dir=tmp_path / "data", authorizer_enabled=True, super_users=("User:ANONYMOUS",))
    broker = Broker(config, NOW)
    yield RequestContext(broker, config, NOW, "test-client")
    broker.close()


def creation(principal: str, name: str, operation: Operation = Operation.WRITE) -> AclCreation:
    return AclCreation(resource_type=ResourceType.TOPIC, resource_name=name, resource_pattern_type=PatternType.PREFIXED,
                       principal=principal, host="*", operation=operation, permission_type=Permission.ALLOW)


def acl_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]


def test_a_change_logs_one_info_line_with_its_author_and_bindings(ctx: RequestContext, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    request = CreateAclsRequest(creations=[creation("User:alice", "ord"), creation("User:bob", "pay", Operation.READ),
                                           creation("nocolon", "x")])
    acls.create(ctx, request, 3)
    [created] = acl_lines(caplog)
    assert created.startswith("ACLs created by User:ANONYMOUS: ")
    assert ("(pattern=ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED), entry=(principal=User:alice,"
            " host=*, operation=WRITE, permissionType=ALLOW))") in created
    assert "principal=User:bob, host=*, operation=READ" in created and "nocolon" not in created

    caplog.clear()
    anything_of_alice = DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter="User:alice", host_filter=None, operation=Operation.ANY, permission_type=Permission.ANY)
    acls.delete(ctx, DeleteAclsRequest(filters=[anything_of_alice]), 3)
    [deleted] = acl_lines(caplog)
    assert deleted.startswith("ACLs deleted by User:ANONYMOUS: ") and "User:alice" in deleted and "User:bob" not in deleted


def test_no_change_no_line(ctx: RequestContext, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    acls.create(ctx, CreateAclsRequest(creations=[creation("nocolon", "x")]), 3)
    nothing = DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter="User:nobody", host_filter=None, operation=Operation.ANY, permission_type=Permission.ANY)
    acls.delete(ctx, DeleteAclsRequest(filters=[nothing]), 3)
    assert acl_lines(caplog) == []
