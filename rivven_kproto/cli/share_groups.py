"""``kproto share-groups list|describe|delete|reset-offsets|delete-offsets``: share groups (KIP-932),
like kafka-share-groups.sh.

``describe`` shows each share-partition's start offset (where delivery resumes) and lag, and the
members with their assignments. ``reset-offsets`` only plans by default (a dry run, as Kafka's
tool does) and sets the start offsets with ``--execute``; the broker refuses while the group has
members, since they hold records under acquisition locks. ``delete-offsets`` forgets whole topics'
state (kafka-share-groups.sh --delete-offsets): their next delivery starts again from
share.auto.offset.reset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import click

from rivven_kproto.client import ClientError, KafkaClient
from rivven_kproto.client import groups as group_admin
from rivven_kproto.client import share_groups as share_admin
from rivven_kproto.client.groups import TP
from rivven_kproto.codec.enums import EARLIEST, LATEST
from rivven_kproto.codec.errors import Errors

from .groups import delete_groups, parse_datetime, parse_duration, parse_topic_spec
from .output import emit, fail, run, table


@click.group("share-groups")
def share_groups() -> None:
    """List, describe and delete share groups; reset or delete their start offsets.

    \b
    Example:
      kproto share-groups reset-offsets workers --topic jobs --to-earliest --execute
    """


@share_groups.command("list")
def list_() -> None:
    """Every share group with its state and coordinator.

    \b
    Example:
      kproto --format json share-groups list
    """

    async def operation(client: KafkaClient) -> list[share_admin.ListedShareGroup]:
        return await share_admin.list_share_groups(client)

    listed = run(operation)
    data = {"groups": [{"group_id": g.group_id, "state": g.state, "coordinator": g.coordinator} for g in listed]}
    emit(data, lambda: table(None, ["group", "state", "coordinator"],
                             [[g.group_id, g.state, g.coordinator] for g in listed]))


def _description_json(d: share_admin.ShareGroupDescription) -> dict[str, Any]:
    owners: dict[TP, list[str]] = {}
    for m in d.members:
        for tp in m.assignment:
            owners.setdefault(tp, []).append(m.member_id)
    return {
        "group_id": d.group_id, "coordinator": d.coordinator, "state": d.state, "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch, "assignor": d.assignor,
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "member_epoch": m.member_epoch,
                     "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]} for m in d.members],
        "offsets": [{"topic": t, "partition": p,
                     "start_offset": None if o.start_offset < 0 else o.start_offset,
                     "lag": None if o.lag < 0 else o.lag, "members": sorted(owners.get((t, p), []))}
                    for (t, p), o in sorted(d.offsets.items())],
    }


@share_groups.command()
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
def describe(group_ids: tuple[str, ...]) -> None:
    """State and members of share groups, and per share-partition its start offset and lag.

    \b
    Example:
      kproto share-groups describe workers
    """

    async def operation(client: KafkaClient) -> list[share_admin.ShareGroupDescription]:
        return [await share_admin.describe_share_group(client, g) for g in dict.fromkeys(group_ids)]

    data = {"groups": [_description_json(d) for d in run(operation)]}

    def render() -> list[Any]:
        out: list[Any] = []
        for item in data["groups"]:
            title = (f"share group {item['group_id']}: {item['state']}, coordinator {item['coordinator']}, "
                     f"group epoch {item['group_epoch']}, assignor {item['assignor']}")
            out.append(table(title, ["topic", "partition", "start offset", "lag", "members"], [
                [o["topic"], o["partition"], o["start_offset"] if o["start_offset"] is not None else "-",
                 o["lag"] if o["lag"] is not None else "-", len(o["members"])] for o in item["offsets"]]))
            out.append(table(None, ["member", "host", "client id", "epoch", "assigned"], [
                [m["member_id"], m["client_host"], m["client_id"], m["member_epoch"],
                 " ".join(f"{a['topic']}:{a['partition']}" for a in m["assignment"]) or "-"] for m in item["members"]]))
        return out

    emit(data, render)


@share_groups.command()
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
def delete(group_ids: tuple[str, ...]) -> None:
    """Delete empty share groups and their share-partitions' state.

    \b
    Example:
      kproto share-groups delete workers
    """

    delete_groups(group_ids)


@dataclass
class ResetPlan:
    previous: dict[TP, int | None]
    target: dict[TP, int]


async def _plan(client: KafkaClient, group_id: str, specs: list[tuple[str, list[int] | None]], all_topics: bool,
                kind: str, value: int) -> ResetPlan:
    description = await share_admin.describe_share_group(client, group_id)
    if description.members:
        raise ClientError(Errors.NON_EMPTY_GROUP, f"start offsets of share group {group_id} can only be reset while "
                          f"it is Empty, but it has {len(description.members)} member(s)")
    wanted: list[TP] = sorted(description.offsets) if all_topics else []
    for topic, partitions in specs:
        existing = await group_admin.topic_partitions(client, topic)
        if partitions is None:
            wanted += existing
            continue
        missing = sorted({(topic, p) for p in partitions} - set(existing))
        if missing:
            raise ClientError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} has no partition {missing[0][1]}")
        wanted += [(topic, p) for p in partitions]
    wanted = sorted(set(wanted))
    if not wanted:
        raise ClientError(Errors.INVALID_REQUEST, f"nothing to reset: share group {group_id} has no share-partitions")
    earliest = await group_admin.end_offsets(client, wanted, EARLIEST)
    latest = await group_admin.end_offsets(client, wanted, LATEST)
    found = await group_admin.end_offsets(client, wanted, value) if kind == "timestamp" else {}
    target: dict[TP, int] = {}
    for tp in wanted:
        low, high = earliest[tp], latest[tp]
        if low is None or high is None:
            raise ClientError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no leader answered for {tp[0]}-{tp[1]}")
        if kind == "earliest":
            target[tp] = low
        elif kind == "latest":
            target[tp] = high
        elif kind == "offset":
            target[tp] = min(max(value, low), high)  # clamped to the log, as Kafka's tool does
        else:
            at = found.get(tp)
            target[tp] = high if at is None or at < 0 else at
    previous = {tp: (o.start_offset if o.start_offset >= 0 else None)
                for tp, o in description.offsets.items() if tp in target}
    return ResetPlan({tp: previous.get(tp) for tp in wanted}, target)


@share_groups.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]", help="Reset this topic (or these partitions); repeatable.")
@click.option("--all-topics", is_flag=True, help="Reset every share-partition the group has.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), metavar="OFFSET", help="To this offset (clamped to the log).")
@click.option("--to-datetime", metavar="ISO8601", help="To the first record at or after this ISO 8601 date-time.")
@click.option("--by-duration", metavar="PnDTnHnM", help="To the first record at or after now minus this ISO 8601 duration.")
@click.option("--execute", is_flag=True, help="Set the new start offsets (default: only show them, a dry run).")
def reset_offsets(group_id: str, topic_specs: tuple[str, ...], all_topics: bool, to_earliest: bool, to_latest: bool,
                  to_offset: int | None, to_datetime: str | None, by_duration: str | None, execute: bool) -> None:
    """Move an empty share group's start offsets; a dry run unless --execute is given.

    \b
    Example:
      kproto share-groups reset-offsets workers --topic jobs --to-earliest --execute
    """
    chosen = [
        ("earliest", 0) if to_earliest else None,
        ("latest", 0) if to_latest else None,
        ("offset", to_offset) if to_offset is not None else None,
        ("timestamp", parse_datetime(to_datetime)) if to_datetime is not None else None,
        ("timestamp", int(time.time() * 1000) - parse_duration(by_duration)) if by_duration is not None else None,
    ]
    given = [c for c in chosen if c is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --by-duration")
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    specs = [parse_topic_spec(s) for s in topic_specs]
    kind, value = given[0]

    async def operation(client: KafkaClient) -> ResetPlan:
        plan = await _plan(client, group_id, specs, all_topics, kind, value)
        if execute:
            await share_admin.alter_share_offsets(client, group_id, plan.target)
        return plan

    plan = run(operation)
    data = {"group": group_id, "executed": execute, "offsets": [
        {"topic": t, "partition": p, "previous_start_offset": plan.previous[(t, p)], "new_start_offset": offset}
        for (t, p), offset in sorted(plan.target.items())]}
    title = f"share group {group_id}: " + ("start offsets reset" if execute else "dry run, nothing changed (add --execute)")
    rows = [[t, p, plan.previous[(t, p)] if plan.previous[(t, p)] is not None else "-", offset]
            for (t, p), offset in sorted(plan.target.items())]
    emit(data, lambda: table(title, ["topic", "partition", "previous start offset", "new start offset"], rows))


@share_groups.command("delete-offsets")
@click.option("--group", "group_id", required=True, metavar="GROUP", help="The share group (it must be empty).")
@click.option("--topic", "topics", required=True, multiple=True, metavar="TOPIC",
              help="Forget the group's state for this topic (all its partitions); repeatable.")
def delete_offsets(group_id: str, topics: tuple[str, ...]) -> None:
    """Forget an empty share group's start offsets and in-flight state for whole topics, as
    kafka-share-groups.sh --delete-offsets does: they start again from share.auto.offset.reset.
    Exits 1 when the group or any topic failed.

    \b
    Example:
      kproto share-groups delete-offsets --group workers --topic jobs
    """

    async def operation(client: KafkaClient) -> dict[str, int]:
        return await share_admin.delete_share_offsets(client, group_id, list(topics))

    results = run(operation)
    rows = [(topic, Errors.for_code(code)) for topic, code in results.items()]
    failures = [(topic, error) for topic, error in rows if error is not Errors.NONE]
    if failures:
        done = [topic for topic, error in rows if error is Errors.NONE]
        detail = "; ".join(f"topic {topic}: {error.name}" for topic, error in failures[1:])
        fail(failures[0][1].name, f"share group {group_id} on topic {failures[0][0]}: "
             f"{failures[0][1].message.rstrip('.')}{'; ' + detail if detail else ''}"
             f"{'; deleted: ' + ', '.join(done) if done else ''}")
    data = {"group": group_id, "deleted": [topic for topic, _ in rows]}
    emit(data, lambda: table(f"share group {group_id}: offsets deleted", ["topic", "status"],
                             [[topic, "Successful"] for topic, _ in rows]))
