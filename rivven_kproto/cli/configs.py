"""``kproto configs describe|set|delete`` for a topic (``--topic``), a broker (``--broker``), the
cluster-wide broker defaults (``--broker-defaults``, Kafka's ``--entity-default``) or a group
(``--group``, Kafka's ``--entity-type groups``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from rivven_kproto.client import KafkaClient, admin

from .output import emit, fail, parse_assignments, run, table

F = TypeVar("F", bound=Callable[..., Any])


def _resource_options(func: F) -> F:
    func = click.option("--broker-defaults", is_flag=True,
                        help="The cluster-wide dynamic broker defaults (kafka-configs' --entity-default).")(func)
    func = click.option("--broker", "broker_id", type=click.IntRange(min=0), metavar="ID", help="A broker, by node id.")(func)
    func = click.option("--group", metavar="ID", help="A group (share.auto.offset.reset, ...).")(func)
    func = click.option("--topic", metavar="NAME", help="A topic.")(func)
    return func


def _resource(topic: str | None, broker_id: int | None, broker_defaults: bool,
              group: str | None = None) -> tuple[admin.ResourceType, str]:
    if (topic is not None) + (broker_id is not None) + broker_defaults + (group is not None) != 1:
        raise click.UsageError("give exactly one of --topic NAME, --group ID, --broker ID and --broker-defaults")
    if topic is not None:
        return admin.ResourceType.TOPIC, topic
    if group is not None:
        return admin.ResourceType.GROUP, group
    return admin.ResourceType.BROKER, "" if broker_defaults else str(broker_id)


def _resource_json(kind: admin.ResourceType, name: str) -> dict[str, str]:
    return {"type": kind.name.lower(), "name": name}


@click.group()
def configs() -> None:
    """Show and change topic, broker and group configs (DescribeConfigs / IncrementalAlterConfigs).

    \b
    Example:
      kproto configs set --topic demo retention.ms=3600000
      kproto configs set --group workers share.auto.offset.reset=earliest
    """


@configs.command()
@_resource_options
@click.option("--key", "keys", multiple=True, metavar="NAME", help="Only this config; repeatable.")
@click.option("--overrides", is_flag=True, help="Only values set on the resource itself.")
def describe(
    topic: str | None, group: str | None, broker_id: int | None, broker_defaults: bool, keys: tuple[str, ...],
    overrides: bool,
) -> None:
    """Configs with value, source and flags (sensitive values are hidden).

    \b
    Example:
      kproto configs describe --topic demo --key retention.ms
    """
    kind, name = _resource(topic, broker_id, broker_defaults, group)

    async def operation(client: KafkaClient) -> list[admin.ConfigEntry]:
        return await admin.describe_configs(client, kind, name, list(keys) or None)

    entries = run(operation)
    unknown = sorted(set(keys) - {e.name for e in entries})
    if unknown:  # Kafka answers the known keys only; say which were not found rather than print nothing
        fail("INVALID_CONFIG", f"{kind.name.lower()} {name} has no config {', '.join(unknown)}")
    if overrides:  # set on this very resource, not inherited from a broker level
        own = ("DYNAMIC_TOPIC_CONFIG" if topic is not None else "GROUP_CONFIG" if group is not None else
               "DYNAMIC_DEFAULT_BROKER_CONFIG" if broker_defaults else "DYNAMIC_BROKER_CONFIG")
        entries = [e for e in entries if e.source == own]
    data = {
        "resource": _resource_json(kind, name),
        "configs": [
            {"name": e.name, "value": e.value, "source": e.source, "read_only": e.read_only, "sensitive": e.sensitive}
            for e in entries
        ],
    }
    rows = [[e.name, "(sensitive)" if e.sensitive else e.value, e.source, "yes" if e.read_only else "no"] for e in entries]
    emit(data, lambda: table(f"{kind.name.lower()} {name}", ["name", "value", "source", "read-only"], rows))


@configs.command("set")
@_resource_options
@click.argument("items", nargs=-1, required=True, metavar="KEY=VALUE...")
def set_(topic: str | None, group: str | None, broker_id: int | None, broker_defaults: bool,
         items: tuple[str, ...]) -> None:
    """Set configs; others keep their values.

    \b
    Example:
      kproto configs set --topic demo retention.ms=3600000 cleanup.policy=compact
      kproto configs set --broker-defaults log.retention.ms=86400000
    """
    kind, name = _resource(topic, broker_id, broker_defaults, group)
    values = parse_assignments(items, "KEY=VALUE")
    changes: list[tuple[str, admin.AlterConfigOp, str | None]] = [(k, admin.AlterConfigOp.SET, v) for k, v in values.items()]

    async def operation(client: KafkaClient) -> None:
        await admin.alter_configs(client, kind, name, changes)

    run(operation)
    emit({"resource": _resource_json(kind, name), "set": values}, lambda: f"{kind.name.lower()} {name}: set " + ", ".join(f"{k}={v}" for k, v in values.items()))


@configs.command()
@_resource_options
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
def delete(topic: str | None, group: str | None, broker_id: int | None, broker_defaults: bool,
           keys: tuple[str, ...]) -> None:
    """Remove overrides, so the configs fall back to their defaults.

    \b
    Example:
      kproto configs delete --topic demo retention.ms
    """
    kind, name = _resource(topic, broker_id, broker_defaults, group)
    changes: list[tuple[str, admin.AlterConfigOp, str | None]] = [(k, admin.AlterConfigOp.DELETE, None) for k in keys]

    async def operation(client: KafkaClient) -> None:
        await admin.alter_configs(client, kind, name, changes)

    run(operation)
    emit({"resource": _resource_json(kind, name), "deleted": list(keys)}, lambda: f"{kind.name.lower()} {name}: deleted " + ", ".join(keys))
