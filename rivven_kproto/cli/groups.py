"""``kproto groups list|describe|delete|reset-offsets``: consumer groups, like kafka-consumer-groups.sh.

``describe`` shows members with their assigned partitions and, per partition, the committed
offset, the log end offset and the lag. ``reset-offsets`` only plans by default (a dry run, as
Kafka's tool does) and commits with ``--execute``; like Kafka it refuses while the group has
members (state other than Empty or Dead), since a live consumer would overwrite the offsets.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass
from typing import Any

import click

from rivven_kproto.client import ClientError, KafkaClient
from rivven_kproto.client import groups as group_admin
from rivven_kproto.client.groups import TP, CommittedOffset, GroupDescription
from rivven_kproto.codec.enums import EARLIEST, LATEST
from rivven_kproto.codec.errors import Errors

from .output import emit, fail, run, table


@click.group()
def groups() -> None:
    """List, describe and delete consumer groups; reset their committed offsets.

    \b
    Example:
      kproto groups reset-offsets billing --topic orders --to-earliest --execute
    """


@groups.command("list")
@click.option("--state", "states", multiple=True, metavar="STATE", help="Only groups in this state (Stable, Empty, ...); repeatable.")
def list_(states: tuple[str, ...]) -> None:
    """Every group with its protocol type, state and coordinator.

    \b
    Example:
      kproto --format json groups list --state Stable
    """

    async def operation(client: KafkaClient) -> list[group_admin.ListedGroup]:
        return await group_admin.list_groups(client, list(states))

    listed = run(operation)
    data = {
        "groups": [
            {"group_id": g.group_id, "type": g.group_type, "protocol_type": g.protocol_type, "state": g.state,
             "coordinator": g.coordinator}
            for g in listed
        ]
    }
    rows = [[g.group_id, g.group_type or "-", g.protocol_type or "-", g.state, g.coordinator] for g in listed]
    emit(data, lambda: table(None, ["group", "type", "protocol type", "state", "coordinator"], rows))


@dataclass
class GroupReport:
    description: GroupDescription
    committed: dict[TP, CommittedOffset]
    log_end: dict[TP, int | None]

    def owners(self) -> dict[TP, str]:
        return {tp: m.member_id for m in self.description.members for tp in m.assignment or []}

    def partitions(self) -> list[TP]:
        return sorted(set(self.committed) | set(self.owners()))


async def _report(client: KafkaClient, group_id: str) -> GroupReport:
    description = await group_admin.describe_group(client, group_id)
    committed = await group_admin.fetch_offsets(client, group_id)
    if not description.exists and not committed:
        raise ClientError(Errors.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
    assigned = {tp for m in description.members for tp in m.assignment or []}
    log_end = await group_admin.end_offsets(client, sorted(set(committed) | assigned))
    return GroupReport(description, committed, log_end)


def _report_json(report: GroupReport) -> dict[str, Any]:
    d = report.description
    owners = report.owners()
    offsets = []
    for tp in report.partitions():
        committed = report.committed.get(tp)
        end = report.log_end.get(tp)
        offsets.append({
            "topic": tp[0],
            "partition": tp[1],
            "committed_offset": None if committed is None else committed.offset,
            "log_end_offset": end,
            "lag": None if committed is None or end is None else max(0, end - committed.offset),
            "metadata": None if committed is None else committed.metadata,
            "member_id": owners.get(tp),
        })
    return {
        "group_id": d.group_id,
        "coordinator": d.coordinator,
        "state": d.state,
        "type": d.group_type,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": _tps_json(m.assignment),
                "member_epoch": m.member_epoch,
                "target_assignment": _tps_json(m.target_assignment),
            }
            for m in d.members
        ],
        "offsets": offsets,
    }


def _tps_json(partitions: list[TP] | None) -> list[dict[str, Any]] | None:
    return None if partitions is None else [{"topic": t, "partition": p} for t, p in partitions]


def _tps_text(partitions: list[dict[str, Any]] | None) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or []:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


@groups.command()
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
def describe(group_ids: tuple[str, ...]) -> None:
    """State and members of groups, and per partition the committed offset, log end and lag.

    \b
    Example:
      kproto groups describe billing
    """

    async def operation(client: KafkaClient) -> list[GroupReport]:
        return [await _report(client, group_id) for group_id in dict.fromkeys(group_ids)]

    reports = run(operation)
    data = {"groups": [_report_json(r) for r in reports]}

    def render() -> list[Any]:
        out: list[Any] = []
        for item in data["groups"]:
            title = (f"group {item['group_id']}: {item['state']}, {item['type']} group, protocol {item['protocol'] or '-'}, "
                     f"coordinator {item['coordinator']}")
            if item["group_epoch"] is not None:
                title += f", group epoch {item['group_epoch']}, assignment epoch {item['assignment_epoch']}"
            clients = {m["member_id"]: m for m in item["members"]}
            rows = []
            for o in item["offsets"]:
                member = clients.get(o["member_id"] or "", {})
                rows.append([o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"],
                             o["member_id"] or "-", member.get("client_host", "-"), member.get("client_id", "-")])
            out.append(table(title, ["topic", "partition", "committed", "log end", "lag", "member", "host", "client id"], rows))
            if item["group_epoch"] is not None:  # KIP-848: where each member stands in its reconciliation
                out.append(table(None, ["member", "instance", "epoch", "assigned", "target"], [
                    [m["member_id"], m["group_instance_id"] or "-", m["member_epoch"], _tps_text(m["assignment"]),
                     _tps_text(m["target_assignment"])]
                    for m in item["members"]
                ]))
            idle = [m for m in item["members"] if not m["assignment"]]
            if idle:
                out.append(table(None, ["member without partitions", "host", "client id"],
                                 [[m["member_id"], m["client_host"], m["client_id"]] for m in idle]))
        return out

    emit(data, render)


@groups.command()
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
def delete(group_ids: tuple[str, ...]) -> None:
    """Delete empty groups and their committed offsets.

    \b
    Example:
      kproto groups delete billing old-billing
    """

    delete_groups(group_ids)


def delete_groups(group_ids: tuple[str, ...]) -> None:
    """DeleteGroups and its report (``groups delete`` and ``share-groups delete``): the deleted ones,
    or the first failure's error with the others' names and what was deleted."""

    async def operation(client: KafkaClient) -> dict[str, int]:
        return await group_admin.delete_groups(client, list(group_ids))

    results = run(operation)
    deleted = [g for g, code in results.items() if code == 0]
    failures = [(g, code) for g, code in results.items() if code != 0]
    if failures:
        group_id, code = failures[0]
        error = Errors.for_code(code)
        others = "; ".join(f"group {g}: {Errors.for_code(c).name}" for g, c in failures[1:])
        done = f"; deleted: {', '.join(deleted)}" if deleted else ""
        fail(error.name, f"group {group_id}: {error.message.rstrip('.')}{'; ' + others if others else ''}{done}")
    emit({"deleted": deleted}, lambda: "deleted " + ", ".join(deleted))


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` (every partition) or ``TOPIC:P[,P...]``; BadParameter otherwise."""
    topic, sep, rest = spec.partition(":")
    if not topic:
        raise click.BadParameter(f"expected TOPIC or TOPIC:P,P..., got {spec!r}", param_hint="'--topic'")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",")})
    except ValueError:
        raise click.BadParameter(f"partitions must be integers in {spec!r}", param_hint="'--topic'") from None
    if not partitions or partitions[0] < 0:
        raise click.BadParameter(f"expected TOPIC:P,P... with partitions >= 0, got {spec!r}", param_hint="'--topic'")
    return topic, partitions


def parse_datetime(text: str) -> int:
    """ISO 8601 (``2026-11-22T10:00:00``, ``...Z``, ``...+02:00``; local time without a zone) in ms."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"not an ISO 8601 date-time: {text!r}", param_hint="'--to-datetime'") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def parse_duration(text: str) -> int:
    """ISO 8601 ``PnDTnHnMnS`` (kafka-consumer-groups' --by-duration) in milliseconds."""
    match = _DURATION.fullmatch(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise click.BadParameter(f"not an ISO 8601 duration like P1DT2H30M: {text!r}", param_hint="'--by-duration'")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


@dataclass
class ResetPlan:
    previous: dict[TP, int | None]
    target: dict[TP, int]


async def _plan(client: KafkaClient, group_id: str, specs: list[tuple[str, list[int] | None]], all_topics: bool,
                spec: tuple[str, int]) -> ResetPlan:
    description = await group_admin.describe_group(client, group_id)
    if description.state not in group_admin.INACTIVE_STATES:
        raise ClientError(
            Errors.NON_EMPTY_GROUP,
            f"offsets of group {group_id} can only be reset while it is inactive (Empty), but it is {description.state}"
            f" with {len(description.members)} member(s)",
        )
    committed = await group_admin.fetch_offsets(client, group_id)
    wanted: list[TP] = []
    if all_topics:
        wanted = sorted(committed)
    for topic, partitions in specs:
        existing = await group_admin.topic_partitions(client, topic)
        if partitions is None:
            wanted += existing
        else:
            missing = sorted(set((topic, p) for p in partitions) - set(existing))
            if missing:
                raise ClientError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} has no partition {missing[0][1]}")
            wanted += [(topic, p) for p in partitions]
    wanted = sorted(set(wanted))
    if not wanted:
        raise ClientError(Errors.INVALID_REQUEST, f"nothing to reset: group {group_id} has no committed offsets")
    kind, value = spec
    earliest = await group_admin.end_offsets(client, wanted, EARLIEST)
    latest = await group_admin.end_offsets(client, wanted, LATEST)
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
        elif kind == "shift":
            if tp not in committed:
                raise ClientError(Errors.INVALID_REQUEST, f"--shift-by: group {group_id} has no committed offset for {tp[0]}-{tp[1]}")
            target[tp] = min(max(committed[tp].offset + value, low), high)
    if kind == "timestamp":
        found = await group_admin.end_offsets(client, wanted, value)
        for tp in wanted:
            offset = found[tp]
            target[tp] = latest[tp] if offset is None or offset < 0 else offset  # type: ignore[assignment]
    previous: dict[TP, int | None] = {tp: (committed[tp].offset if tp in committed else None) for tp in wanted}
    return ResetPlan(previous, target)


@groups.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]", help="Reset this topic (or these partitions); repeatable.")
@click.option("--all-topics", is_flag=True, help="Reset every partition the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), metavar="OFFSET", help="To this offset (clamped to the log).")
@click.option("--to-timestamp", type=click.IntRange(min=0), metavar="MS", help="To the first record at or after this time (ms since the epoch).")
@click.option("--to-datetime", metavar="ISO8601", help="Like --to-timestamp, as an ISO 8601 date-time.")
@click.option("--shift-by", type=int, metavar="N", help="Move each committed offset by N (negative: back), clamped to the log.")
@click.option("--by-duration", metavar="PnDTnHnM", help="To the first record at or after now minus this ISO 8601 duration.")
@click.option("--execute", is_flag=True, help="Commit the new offsets (default: only show them, a dry run).")
def reset_offsets(
    group_id: str,
    topic_specs: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_timestamp: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    by_duration: str | None,
    execute: bool,
) -> None:
    """Move an inactive group's committed offsets; a dry run unless --execute is given.

    \b
    Example:
      kproto groups reset-offsets billing --topic orders:0,1 --to-datetime 2026-11-22T08:00:00Z
      kproto groups reset-offsets billing --all-topics --to-latest --execute
    """
    chosen = [
        ("earliest", 0) if to_earliest else None,
        ("latest", 0) if to_latest else None,
        ("offset", to_offset) if to_offset is not None else None,
        ("timestamp", to_timestamp) if to_timestamp is not None else None,
        ("timestamp", parse_datetime(to_datetime)) if to_datetime is not None else None,
        ("shift", shift_by) if shift_by is not None else None,
        ("timestamp", int(time.time() * 1000) - parse_duration(by_duration)) if by_duration is not None else None,
    ]
    specs_given = [c for c in chosen if c is not None]
    if len(specs_given) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-timestamp, --to-datetime, --shift-by, --by-duration"
        )
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    specs = [parse_topic_spec(s) for s in topic_specs]
    spec = specs_given[0]
    assert spec is not None

    async def operation(client: KafkaClient) -> ResetPlan:
        plan = await _plan(client, group_id, specs, all_topics, spec)
        if execute:
            await group_admin.commit_offsets(client, group_id, plan.target)
        return plan

    plan = run(operation)
    data = {
        "group": group_id,
        "executed": execute,
        "offsets": [
            {"topic": t, "partition": p, "previous_offset": plan.previous[(t, p)], "new_offset": offset}
            for (t, p), offset in sorted(plan.target.items())
        ],
    }
    title = f"group {group_id}: " + ("offsets reset" if execute else "dry run, nothing committed (add --execute)")
    rows = [[t, p, plan.previous[(t, p)], offset] for (t, p), offset in sorted(plan.target.items())]
    emit(data, lambda: table(title, ["topic", "partition", "previous offset", "new offset"], rows))
