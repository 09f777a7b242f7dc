"""``kproto acls list|add|remove``: Kafka's ACLs, as ``kafka-acls.sh`` manages them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from rivven_kproto.client import KafkaClient
from rivven_kproto.client.acls import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    Acl,
    create_acls,
    delete_acls,
    describe_acls,
)

from .output import emit, run, table

F = TypeVar("F", bound=Callable[..., Any])
CLUSTER = "kafka-cluster"


def _selection(func: F) -> F:
    func = click.option("--prefixed", is_flag=True, help="A PREFIXED pattern (default LITERAL; '*' is every name).")(func)
    func = click.option("--cluster", is_flag=True, help="The cluster resource.")(func)
    func = click.option("--transactional-id", metavar="ID")(func)
    func = click.option("--group", metavar="NAME")(func)
    func = click.option("--topic", metavar="NAME")(func)
    return func


def _resource(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool, *, required: bool) -> tuple[int, str | None]:
    chosen = [(RESOURCE_TYPES["topic"], topic), (RESOURCE_TYPES["group"], group),
              (RESOURCE_TYPES["transactional-id"], transactional_id)]
    given = [(kind, name) for kind, name in chosen if name is not None] + ([(RESOURCE_TYPES["cluster"], CLUSTER)] if cluster else [])
    if len(given) > 1 or (required and not given):
        raise click.UsageError("give exactly one of --topic, --group, --transactional-id, --cluster" if required
                               else "give at most one of --topic, --group, --transactional-id, --cluster")
    return given[0] if given else (RESOURCE_TYPES["any"], None)


def _show(acls: list[Acl], title: str) -> None:
    rows = [[a.principal, a.permission_name, a.operation_name, a.resource, a.host] for a in (_Row(x) for x in acls)]
    emit([a.as_json() for a in acls],
         lambda: table(title, ["principal", "permission", "operation", "resource", "host"], rows) if rows else "no ACLs")


class _Row:
    def __init__(self, acl: Acl) -> None:
        data = acl.as_json()
        self.principal, self.host = data["principal"], data["host"]
        self.permission_name, self.operation_name = data["permission"], data["operation"]
        self.resource = f"{data['resource_type']}:{data['pattern_type']}:{data['resource_name']}"


@click.group()
def acls() -> None:
    """List, add and remove ACLs (needs an authorizer on the broker, and Alter/Describe on the cluster).

    \b
    Example:
      kproto acls add --principal User:alice --operation read --operation describe --topic orders
    """


@acls.command("list")
@_selection
@click.option("--principal", metavar="User:NAME")
def list_acls(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool, prefixed: bool, principal: str | None) -> None:
    """ACLs matching the selection (everything by default)."""
    kind, name = _resource(topic, group, transactional_id, cluster, required=False)
    pattern = PATTERN_TYPES["prefixed" if prefixed else ("literal" if name is not None else "any")]
    selection = Acl(kind, name, pattern, principal, None, OPERATIONS["any"], PERMISSIONS["any"])

    async def operation(client: KafkaClient) -> list[Acl]:
        return await describe_acls(client, selection)

    _show(run(operation), "ACLs")


_OPERATION = click.option("--operation", "operations", multiple=True, required=True,
                          type=click.Choice([o for o in OPERATIONS if o != "any"]), help="Repeatable.")


@acls.command("add")
@_selection
@click.option("--principal", required=True, metavar="User:NAME", help="User:NAME or User:* (everyone).")
@_OPERATION
@click.option("--host", default="*", show_default=True)
@click.option("--deny", is_flag=True, help="A DENY ACL (default ALLOW); DENY wins.")
def add(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool, prefixed: bool,
        principal: str, operations: tuple[str, ...], host: str, deny: bool) -> None:
    """Add ACLs, one per operation."""
    kind, name = _resource(topic, group, transactional_id, cluster, required=True)
    pattern = PATTERN_TYPES["prefixed" if prefixed else "literal"]
    permission = PERMISSIONS["deny" if deny else "allow"]
    new = [Acl(kind, name, pattern, principal, host, OPERATIONS[o], permission) for o in operations]

    async def operation(client: KafkaClient) -> None:
        await create_acls(client, new)

    run(operation)
    _show(new, "added")


@acls.command("remove")
@_selection
@click.option("--principal", required=True, metavar="User:NAME")
@_OPERATION
def remove(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool, prefixed: bool,
           principal: str, operations: tuple[str, ...]) -> None:
    """Remove the matching ACLs (ALLOW and DENY, any host)."""
    kind, name = _resource(topic, group, transactional_id, cluster, required=True)
    pattern = PATTERN_TYPES["prefixed" if prefixed else "literal"]
    selections = [Acl(kind, name, pattern, principal, None, OPERATIONS[o], PERMISSIONS["any"]) for o in operations]

    async def operation(client: KafkaClient) -> list[Acl]:
        removed: list[Acl] = []
        for selection in selections:
            removed += await delete_acls(client, selection)
        return removed

    _show(run(operation), "removed")
