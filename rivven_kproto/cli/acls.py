"""``kproto acls list|add|remove``: Kafka's ACLs, as ``kafka-acls.sh`` manages them."""

from __future__ import annotations

import re
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
      kproto acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
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


def _operation_name(value: str) -> str:
    """Kafka's spellings (Read, ClusterAction, CLUSTER_ACTION, cluster-action) as one key."""
    if "_" in value or value.isupper():
        return value.lower().replace("_", "-")
    return re.sub(r"(?<!^)(?=[A-Z])", "-", value).lower()


def _operations(values: tuple[str, ...]) -> list[str]:
    names = [_operation_name(v) for v in values]
    unknown = [v for v, n in zip(values, names, strict=True) if n not in OPERATIONS or n == "any"]
    if unknown:
        choices = ", ".join(o for o in OPERATIONS if o != "any")
        raise click.UsageError(f"unknown operation {', '.join(unknown)}: use {choices} (or Kafka's Read, ClusterAction, ...)")
    return names


def _change_options(func: F) -> F:
    """kafka-acls.sh's flags for --add and --remove (and our earlier --principal/--deny spellings)."""
    for decorator in reversed([
        click.option("--topic", "topics", multiple=True, metavar="NAME", help="Repeatable."),
        click.option("--group", "groups", multiple=True, metavar="NAME", help="Repeatable."),
        click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID", help="Repeatable."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
        click.option("--resource-pattern-type", "pattern_type", type=click.Choice(["literal", "prefixed"], case_sensitive=False),
                     default="literal", show_default=True),
        click.option("--prefixed", is_flag=True, help="Same as --resource-pattern-type prefixed."),
        click.option("--allow-principal", "--principal", "allow_principals", multiple=True, metavar="User:NAME",
                     help="User:NAME or User:* (everyone). Repeatable."),
        click.option("--deny-principal", "deny_principals", multiple=True, metavar="User:NAME", help="Repeatable; DENY wins."),
        click.option("--deny", is_flag=True, help="Make the --allow-principal ACLs DENY ACLs."),
        click.option("--allow-host", "--host", "allow_hosts", multiple=True, metavar="HOST", help="Default: * (any host)."),
        click.option("--deny-host", "deny_hosts", multiple=True, metavar="HOST", help="Default: * (any host)."),
        click.option("--operation", "operations", multiple=True, metavar="OPERATION",
                     help="Repeatable: read, write, create, delete, alter, describe, cluster-action, describe-configs, "
                          "alter-configs, idempotent-write, all (Kafka's Read, ClusterAction, ... also)."),
        click.option("--producer", is_flag=True, help="Write, Describe, Create on the topics (+ Write, Describe on "
                     "--transactional-id; + IdempotentWrite on the cluster with --idempotent)."),
        click.option("--consumer", is_flag=True, help="Read, Describe on the topics and Read on the --group."),
        click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster."),
    ]):
        func = decorator(func)
    return func


def _bindings(options: dict[str, Any], *, removing: bool) -> list[Acl]:
    """The ACLs one add/remove command names, as kafka-acls.sh builds them."""
    topics, groups, txn_ids = options["topics"], options["groups"], options["transactional_ids"]
    cluster = options["cluster"]
    pattern = PATTERN_TYPES["prefixed" if options["prefixed"] else options["pattern_type"].lower()]
    explicit = _operations(options["operations"])
    per_resource: list[tuple[int, str, list[str]]] = []
    if options["producer"] or options["consumer"]:
        if explicit or cluster:
            raise click.UsageError("--producer/--consumer choose the operations: leave out --operation and --cluster")
        if not topics:
            raise click.UsageError("--producer and --consumer need --topic")
        if options["consumer"] and not groups:
            raise click.UsageError("--consumer needs --group")
        topic_ops = (["write", "describe", "create"] if options["producer"] else []) + (
            ["read", "describe"] if options["consumer"] else [])
        per_resource += [(RESOURCE_TYPES["topic"], t, list(dict.fromkeys(topic_ops))) for t in topics]
        if options["consumer"]:
            per_resource += [(RESOURCE_TYPES["group"], g, ["read"]) for g in groups]
        if options["producer"]:
            per_resource += [(RESOURCE_TYPES["transactional-id"], t, ["write", "describe"]) for t in txn_ids]
            if options["idempotent"]:
                per_resource.append((RESOURCE_TYPES["cluster"], CLUSTER, ["idempotent-write"]))
    else:
        if not explicit:
            raise click.UsageError("give --operation (or --producer/--consumer)")
        resources = ([(RESOURCE_TYPES["topic"], t) for t in topics] + [(RESOURCE_TYPES["group"], g) for g in groups]
                     + [(RESOURCE_TYPES["transactional-id"], t) for t in txn_ids]
                     + ([(RESOURCE_TYPES["cluster"], CLUSTER)] if cluster else []))
        if not resources:
            raise click.UsageError("give a resource: --topic, --group, --transactional-id or --cluster")
        per_resource += [(kind, name, explicit) for kind, name in resources]
    allow, deny = list(options["allow_principals"]), list(options["deny_principals"])
    if options["deny"]:
        allow, deny = [], deny + allow
    if not allow and not deny:
        raise click.UsageError("give --allow-principal or --deny-principal")
    any_host = None if removing else "*"
    principals = [(p, PERMISSIONS["allow"], list(options["allow_hosts"]) or [any_host]) for p in allow] + [
        (p, PERMISSIONS["deny"], list(options["deny_hosts"]) or [any_host]) for p in deny]
    if removing and not options["deny"] and not options["deny_principals"] and not options["allow_hosts"]:
        # Our earlier remove matched ALLOW and DENY alike for a principal; kept for --principal.
        principals = [(p, PERMISSIONS["any"], [None]) for p in allow]
    return [
        Acl(kind, name, pattern, principal, host, OPERATIONS[operation], permission)
        for kind, name, operations in per_resource
        for principal, permission, hosts in principals
        for host in hosts
        for operation in operations
    ]


@acls.command("add")
@_change_options
def add(**options: Any) -> None:
    """Add ACLs (kafka-acls.sh --add): one per principal, host, resource and operation.

    \b
    Examples:
      kproto acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
      kproto acls add --allow-principal User:app --producer --topic orders --transactional-id app-tx
      kproto acls add --allow-principal User:app --consumer --topic orders --group app
    """
    new = _bindings(options, removing=False)

    async def operation(client: KafkaClient) -> None:
        await create_acls(client, new)

    run(operation)
    _show(new, "added")


@acls.command("remove")
@_change_options
def remove(**options: Any) -> None:
    """Remove the matching ACLs (kafka-acls.sh --remove; without a host, on any host).

    \b
    Example:
      kproto acls remove --allow-principal User:alice --operation Read --topic orders
    """
    selections = _bindings(options, removing=True)

    async def operation(client: KafkaClient) -> list[Acl]:
        removed: list[Acl] = []
        for selection in selections:
            removed += await delete_acls(client, selection)
        return removed

    _show(run(operation), "removed")
