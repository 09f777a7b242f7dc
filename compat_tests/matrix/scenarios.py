"""One scenario per capability, the same for every client: drive the client through its adapter,
then assert on what was read back (by the same client, and where it matters from the stored log).

An adapter method does the client-specific part and returns observations; the assertions live
here, so every column of a row is held to the same standard. A scenario returns the cell's detail
line (what it verified); any exception fails the cell, with the step it happened in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.records.records import RecordBatch, build_batch

from . import data, fixtures
from .data import Rec
from .model import CODECS, Ctx, describe_error

# ApiVersions: what every client needs from a broker to produce and fetch record batches v2.
REQUIRED_APIS = {
    0: ("Produce", 3),
    1: ("Fetch", 4),
    2: ("ListOffsets", 1),
    3: ("Metadata", 1),
    18: ("ApiVersions", 0),
}


@dataclass(frozen=True)
class Scenario:
    run: Callable[[Any, Ctx], str]
    needs: tuple[str, ...]


def _stored(ctx: Ctx, topic: str, partition: int = 0) -> fixtures.Stored:
    with ctx.step("raw fetch of the stored batches"):
        return fixtures.stored_batches(ctx.inspect_bootstrap, topic, partition)


def connect(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("connect and ApiVersions"):
        versions = adapter.api_versions(ctx)
    for key, (name, needed) in REQUIRED_APIS.items():
        if key not in versions:
            raise AssertionError(f"ApiVersions as the client saw it lacks {name} ({key}): {sorted(versions)}")
        low, high = versions[key]
        if not low <= needed <= high:
            raise AssertionError(f"{name} versions {low}..{high} do not include v{needed}")
    return f"{len(versions)} APIs seen by the client; Produce v{versions[0][0]}-{versions[0][1]}"


def metadata(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("metadata"):
        meta = adapter.metadata(ctx, ctx.topic)
    brokers, leaders = meta["brokers"], meta["partitions"]
    if not brokers:
        raise AssertionError("no brokers in metadata")
    if sorted(leaders) != list(range(fixtures.PARTITIONS)):
        raise AssertionError(f"partitions {sorted(leaders)}, expected 0..{fixtures.PARTITIONS - 1}")
    strays = {p: leader for p, leader in leaders.items() if leader not in brokers}
    if strays:
        raise AssertionError(f"leaders not among the brokers {sorted(brokers)}: {strays}")
    return f"{len(brokers)} broker(s), {len(leaders)} partitions with leaders"


def _roundtrip(
    adapter: Any,
    ctx: Ctx,
    records: list[Rec],
    *,
    codec: str = "none",
    acks: str = "all",
    idempotent: bool = False,
) -> list[Rec]:
    partitions = sorted({r.partition for r in records})
    with ctx.step(f"produce (codec {codec}, acks {acks}{', idempotent' if idempotent else ''})"):
        adapter.produce(ctx, ctx.topic, records, codec=codec, acks=acks, idempotent=idempotent)
    with ctx.step("consume"):
        got = adapter.read(ctx, ctx.topic, partitions, len(records), settle_s=0.3)
    data.assert_same(got, records)
    return got


def codec_row(codec: str) -> Callable[[Any, Ctx], str]:
    def run(adapter: Any, ctx: Ctx) -> str:
        records = data.roundtrip(adapter.profile)
        _roundtrip(adapter, ctx, records, codec=codec)
        stored = {p: _stored(ctx, ctx.topic, p).data_batches for p in range(fixtures.PARTITIONS)}
        # librdkafka (and Kafka's Java producer since KIP-390's follow-ups) sends a batch uncompressed
        # when compressing it would not shrink it: a lone small record split off by a loaded machine.
        # Such a batch is the client's right; a shrinkable one stored uncompressed is a failure.
        codecs = {b.compression.name.lower() for batches in stored.values() for b in batches
                  if b.compression.name.lower() != "none" or _compression_shrinks(b, codec)}
        if codecs != {codec}:
            layout = {p: [(b.compression.name.lower(), len(list(b.iter_absolute()))) for b in batches]
                      for p, batches in stored.items()}
            raise AssertionError(
                f"stored batches use {sorted(codecs)}, not {codec}: the client did not compress; "
                f"(codec, records) per partition: {layout}"
            )
        count = sum(len(b) for b in stored.values())
        return (
            f"{len(records)} records over 3 partitions read back exactly; {count} stored batches, all {codec}"
        )

    return run


def _compression_shrinks(batch: RecordBatch, codec: str) -> bool:
    """Whether ``codec`` would have made this (uncompressed) batch smaller."""
    kind = Compression[codec.upper()]
    if kind is Compression.NONE:
        return True
    return len(build_batch(batch.records, compression=kind)) < len(build_batch(batch.records))


def headers_nulls(adapter: Any, ctx: Ctx) -> str:
    records, exercised = data.tricky(adapter.profile)
    _roundtrip(adapter, ctx, records)
    return "read back exactly: " + ", ".join(exercised)


def acks_row(acks: str) -> Callable[[Any, Ctx], str]:
    def run(adapter: Any, ctx: Ctx) -> str:
        records = data.simple(10, prefix=f"acks{acks}")
        _roundtrip(adapter, ctx, records, acks=acks)
        return f"{len(records)} records with acks={acks} read back exactly"

    return run


def idempotent(adapter: Any, ctx: Ctx) -> str:
    records = data.roundtrip(adapter.profile, per_partition=10, tag="idem")
    _roundtrip(adapter, ctx, records, idempotent=True)
    for p in range(fixtures.PARTITIONS):
        batches = _stored(ctx, ctx.topic, p).data_batches
        pids = {b.producer_id for b in batches}
        if len(pids) != 1 or -1 in pids:
            raise AssertionError(
                f"partition {p}: stored producer ids {pids}, expected one idempotent producer"
            )
        sequences = [(b.base_sequence, b.base_offset) for b in batches]
        if any(seq != offset for seq, offset in sequences):
            raise AssertionError(f"partition {p}: base sequences do not follow offsets: {sequences}")
    return f"{len(records)} records read back exactly once, in order; stored with one producer id, sequences from 0"


def _committed_view(adapter: Any, ctx: Ctx, topic: str, count: int, settle_s: float = 0.5) -> list[Rec]:
    with ctx.step("consume read_committed"):
        return adapter.read(ctx, topic, [0], count, read_committed=True, settle_s=settle_s)


def _expect_view(got: list[Rec], expected: list[Rec], stored: fixtures.Stored) -> None:
    offsets = stored.offsets_of()
    data.assert_same(got, expected, offsets={0: [offsets[r.value] for r in expected]})
    control = {offset for offset, _kind in stored.markers()}
    surfaced = [r.offset for r in got if r.offset in control]
    if surfaced:
        raise AssertionError(f"control records surfaced at offsets {surfaced}")


def txn_commit(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(5, prefix="txn")
    with ctx.step("transactional produce + commit"):
        adapter.txn_produce(ctx, ctx.topic, ctx.name("txn"), [(records, "commit")])
    stored = _stored(ctx, ctx.topic)
    got = _committed_view(adapter, ctx, ctx.topic, len(records))
    _expect_view(got, records, stored)
    if [kind for _o, kind in stored.markers()] != ["COMMIT"]:
        raise AssertionError(f"markers in the log: {stored.markers()}, expected one COMMIT")
    if not all(b.is_transactional for b in stored.data_batches):
        raise AssertionError("data batches are not flagged transactional")
    return f"{len(records)} records committed and read back read_committed; one COMMIT marker in the log"


def txn_abort(adapter: Any, ctx: Ctx) -> str:
    aborted = data.simple(4, prefix="aborted")
    committed = data.simple(2, prefix="committed")
    with ctx.step("transactional produce + abort, then produce + commit"):
        adapter.txn_produce(ctx, ctx.topic, ctx.name("txn"), [(aborted, "abort"), (committed, "commit")])
    stored = _stored(ctx, ctx.topic)
    kinds = [kind for _o, kind in stored.markers()]
    if kinds != ["ABORT", "COMMIT"]:
        raise AssertionError(f"markers in the log: {stored.markers()}, expected ABORT then COMMIT")
    got = _committed_view(adapter, ctx, ctx.topic, len(committed))
    _expect_view(got, committed, stored)
    with ctx.step("consume read_uncommitted"):
        everything = adapter.read(ctx, ctx.topic, [0], len(aborted) + len(committed), settle_s=0.3)
    if data.values(everything) != data.values(aborted + committed):
        raise AssertionError(f"read_uncommitted saw {data.values(everything)}")
    return "aborted records hidden from read_committed, visible read_uncommitted; ABORT then COMMIT marker"


def read_committed(adapter: Any, ctx: Ctx) -> str:
    mix = fixtures.TxnMix(ctx.bootstrap, ctx.topic, ctx.name("mix"))
    with ctx.step("set-up (librdkafka transactions)"):
        mix.start()
    stored = _stored(ctx, ctx.topic)
    got = _committed_view(adapter, ctx, ctx.topic, len(mix.visible_before), settle_s=1.0)
    with ctx.step("while a transaction is open"):
        _expect_view(got, mix.expected(mix.visible_before), stored)
    with ctx.step("set-up: commit the open transaction"):
        mix.finish()
    stored = _stored(ctx, ctx.topic)
    got = _committed_view(adapter, ctx, ctx.topic, len(mix.visible_after))
    with ctx.step("after the commit"):
        _expect_view(got, mix.expected(mix.visible_after), stored)
    return (
        f"plain + committed records only, in log offsets; stops at the open transaction; "
        f"{len(stored.markers())} control records never surfaced"
    )


def fencing(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("fence"):
        error = adapter.fence(ctx, ctx.topic, ctx.name("fence"))
    words = ("fenc", "epoch")
    if not any(word in error.lower() for word in words):
        raise AssertionError(f"the zombie producer failed, but not with a fencing error: {error}")
    stored = _stored(ctx, ctx.topic)
    got = _committed_view(adapter, ctx, ctx.topic, 1)
    if data.values(got) != [b"winner"]:
        raise AssertionError(f"read_committed after fencing: {data.values(got)}, expected only the winner")
    kinds = sorted(kind for _o, kind in stored.markers())
    if kinds != ["ABORT", "COMMIT"]:
        raise AssertionError(
            f"markers {stored.markers()}: expected the zombie's ABORT and the winner's COMMIT"
        )
    return f"zombie fenced ({error[:80]}); its record aborted, the new producer's committed"


def group_rebalance(adapter: Any, ctx: Ctx, method: str = "group_rebalance") -> str:
    phase1 = [Rec(p, None, f"before-{p}-{i}".encode()) for p in range(3) for i in range(2)]
    phase2 = [Rec(p, None, f"after-{p}-{i}".encode()) for p in range(3) for i in range(2)]
    with ctx.step("two consumers in one group"):
        obs = getattr(adapter, method)(ctx, ctx.topic, ctx.name("group"), phase1, phase2)
    everything = set(range(fixtures.PARTITIONS))
    a_first, a_after, b_after = (set(obs[k]) for k in ("a_first", "a_after", "b_after"))
    if a_first != everything:
        raise AssertionError(f"the first member was assigned {sorted(a_first)}, expected all partitions")
    if a_after & b_after or a_after | b_after != everything or not a_after or not b_after:
        raise AssertionError(f"after the rebalance: A {sorted(a_after)}, B {sorted(b_after)}")
    seen_a = {r.value for r in obs["a_records"]}
    missing = [r.value for r in phase1 if r.value not in seen_a]
    if missing:
        raise AssertionError(f"the first member did not read {missing}")
    owner = {**{p: "a" for p in a_after}, **{p: "b" for p in b_after}}
    for record in phase2:
        readers = [who for who in "ab" for r in obs[f"{who}_records"] if r.value == record.value]
        if readers != [owner[record.partition]]:
            raise AssertionError(
                f"{record.value!r} (partition {record.partition}) read by {readers}, "
                f"expected once by {owner[record.partition]}"
            )
    return (
        f"A alone: {sorted(a_first)}; after B joined: A {sorted(a_after)}, B {sorted(b_after)}; "
        "later records read once, by their partition's owner"
    )


def group_upgrade(adapter: Any, ctx: Ctx) -> str:
    """KIP-848's online upgrade: a classic member alone, a ``group.protocol=consumer`` member joins (the
    broker converts the group), then leaves (converted back). Each member commits what it read, so
    every record is read exactly once, by the member that owned its partition at the time."""
    phases = [[Rec(p, None, f"{name}-{p}-{i}".encode()) for p in range(3) for i in range(2)]
              for name in ("classic", "upgraded", "downgraded")]
    group = ctx.name("upgrade")
    with ctx.step("classic member, consumer-protocol member joins, then leaves"):
        obs = adapter.group_upgrade(ctx, ctx.topic, group, phases, lambda: fixtures.group_type(ctx.inspect_bootstrap, group))
    everything = set(range(fixtures.PARTITIONS))
    if obs["types"] != ["classic", "consumer", "classic"]:
        raise AssertionError(f"group type alone/joined/left: {obs['types']}, expected classic, consumer, classic")
    a_first, a_split, b_split, a_last = (set(obs[k]) for k in ("a_first", "a_split", "b_split", "a_last"))
    if a_first != everything or a_last != everything:
        raise AssertionError(f"the classic member alone owned {sorted(a_first)}, after the leave {sorted(a_last)}")
    if a_split & b_split or a_split | b_split != everything or not a_split or not b_split:
        raise AssertionError(f"while upgraded: classic {sorted(a_split)}, consumer-protocol {sorted(b_split)}")
    owners = [dict.fromkeys(everything, "a"), {**dict.fromkeys(a_split, "a"), **dict.fromkeys(b_split, "b")},
              dict.fromkeys(everything, "a")]
    for phase, owner in zip(phases, owners, strict=True):
        for record in phase:
            readers = [who for who in "ab" for r in obs[f"{who}_records"] if r.value == record.value]
            if readers != [owner[record.partition]]:
                raise AssertionError(f"{record.value!r} (partition {record.partition}) read by {readers}, "
                                     f"expected once by {owner[record.partition]}")
    return (f"classic alone: {sorted(a_first)}; upgraded: classic {sorted(a_split)}, consumer-protocol "
            f"{sorted(b_split)}; downgraded: classic {sorted(a_last)}; every record read once, commits kept")


def commit_offsets(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(10, prefix="commit")
    with ctx.step("set-up: 10 records"):
        fixtures.produce_plain(ctx.bootstrap, ctx.topic, records)
    with ctx.step("consume 4, commit, resume"):
        obs = adapter.commit_fetch(ctx, ctx.topic, ctx.name("group"))
    data.assert_same(obs["consumed"], records[:4])
    if obs["committed"] is not None and obs["committed"] != 4:
        raise AssertionError(f"committed offset fetched back as {obs['committed']}, expected 4")
    if obs.get("metadata") is not None and obs["metadata"] != "matrix":
        raise AssertionError(f"commit metadata fetched back as {obs['metadata']!r}, expected 'matrix'")
    data.assert_same(obs["resumed"], records[4:], offsets={0: list(range(4, 10))})
    how = (
        "fetched back as 4" if obs["committed"] is not None else "used by the resuming member (no query API)"
    )
    if obs.get("metadata") is not None:
        how += " with its metadata"
    return f"committed offset {how}; a new member resumed at offset 4 ({obs.get('how', 'group')})"


def send_offsets(adapter: Any, ctx: Ctx, method: str = "send_offsets") -> str:
    in_topic, out_topic = ctx.topics
    records = data.simple(5, prefix="in")
    with ctx.step("set-up: 5 input records"):
        fixtures.produce_plain(ctx.bootstrap, in_topic, records)
    group = ctx.name("eos")
    with ctx.step("consume, transform, produce + send offsets + commit"):
        how = getattr(adapter, method)(ctx, in_topic, out_topic, group, ctx.name("txn"))
    expected = [replace(r, value=b"out-" + (r.value or b"")) for r in records]
    got = _committed_view(adapter, ctx, out_topic, len(expected))
    _expect_view(got, expected, _stored(ctx, out_topic))
    with ctx.step("fetch committed offsets"):
        committed = adapter.committed(ctx, group, in_topic, [0])
    if committed != {0: 5}:
        raise AssertionError(f"group's committed offsets {committed}, expected {{0: 5}}")
    return f"output committed with the input offsets: read_committed output exact, group offset 5 ({how})"


def admin_topics(adapter: Any, ctx: Ctx) -> str:
    name = ctx.name("admin")
    with ctx.step("create/describe/delete"):
        obs = adapter.admin_topics(ctx, name)
    if not obs["listed_after_create"]:
        raise AssertionError("created topic not listed")
    if sorted(obs["partitions"]) != [0, 1]:
        raise AssertionError(f"described partitions {obs['partitions']}, created with 2")
    if obs.get("retention") not in (None, "3600000"):
        raise AssertionError(f"created with retention.ms=3600000, described {obs['retention']}")
    if obs["listed_after_delete"]:
        raise AssertionError("deleted topic still listed")
    return "created (2 partitions, retention.ms), described, deleted, gone from the listing"


def admin_configs(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("describe/alter configs"):
        obs = adapter.admin_configs(ctx, ctx.topic)
    if obs["before"].get("cleanup.policy") != "delete":
        raise AssertionError(f"cleanup.policy described as {obs['before'].get('cleanup.policy')!r}")
    if obs["after"].get("retention.ms") != "7200000":
        raise AssertionError(f"retention.ms after the alter: {obs['after'].get('retention.ms')!r}")
    return "cleanup.policy=delete described; retention.ms altered to 7200000 and described back"


def replica_assignment(adapter: Any, ctx: Ctx) -> str:
    """An explicit assignment naming every live broker (up to three), in an order of its own per
    partition: kept as given (the first replica leads), also for a partition added later."""
    name = ctx.name("assigned")
    with ctx.step("list the brokers"):
        brokers = sorted(adapter.broker_ids(ctx))[:3]
    rotations = [brokers[i:] + brokers[:i] for i in range(len(brokers))]
    created, added = [rotations[-1], rotations[0]], [rotations[1 % len(rotations)]]
    with ctx.step(f"create with {created}, add a partition with {added}, describe"):
        described = adapter.assign_replicas(ctx, name, created, added)
    wanted = [(replicas[0], replicas) for replicas in created + added]
    if described != wanted:
        raise AssertionError(f"described (leader, replicas) {described}, assigned {wanted}")
    return f"{len(wanted)} partitions on brokers {brokers}: leaders and replica order as assigned"


def config_sources_41(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("describe the topic's configs with their sources"):
        sources = adapter.config_sources(ctx, ctx.topic)
    wanted = {"min.insync.replicas": ("1", "DYNAMIC_DEFAULT_BROKER_CONFIG"), "cleanup.policy": ("delete", "DEFAULT_CONFIG")}
    got = {key: sources.get(key) for key in wanted}
    if got != wanted:
        raise AssertionError(f"described {got}, Kafka 4.1 reports {wanted}")
    return "min.insync.replicas from the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), cleanup.policy DEFAULT_CONFIG"


def list_config_resources(adapter: Any, ctx: Ctx) -> str:
    with ctx.step("list config resources, all types, then topics only"):
        listed, topics = adapter.list_config_resources(ctx)
    if ctx.topic not in listed.get("topic", []) or not listed.get("broker"):
        raise AssertionError(f"listed {listed}: the cell's topic and the brokers should be there")
    if set(topics) != {"topic"} or ctx.topic not in topics["topic"]:
        raise AssertionError(f"TOPIC only: listed {set(topics)}")
    return f"topics and brokers {sorted(listed['broker'])} listed; the TOPIC filter lists topics only"


def share_group(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(8, prefix="share")
    with ctx.step("share-group consume (KIP-932), each record acknowledged"):
        got = adapter.share_consume(ctx, ctx.topic, ctx.name("share"), records)
    # Warm-up records come first in the log: the cell's records follow them, each delivered once.
    first = min((r.offset for r in got if r.offset is not None), default=0)
    data.assert_same(got, records, offsets={0: [first + i for i in range(len(records))]}, check_timestamps=False)
    return f"{len(records)} records delivered once each to a share-group member and acknowledged"


def offsets_by_time(adapter: Any, ctx: Ctx) -> str:
    base = data.now_ms() - 600_000
    records = [Rec(0, None, f"t{i}".encode(), timestamp=base + 10 * i) for i in range(5)]
    with ctx.step("set-up: 5 records 10 ms apart"):
        fixtures.produce_plain(ctx.bootstrap, ctx.topic, records)
    queries = {base - 1000: 0, base + 15: 2, base + 40: 4, base + 41: None}
    with ctx.step("list offsets by time"):
        got = adapter.offsets_for_times(ctx, ctx.topic, 0, list(queries))
    if got != queries:
        raise AssertionError(f"offsets for times {got}, expected {queries} (base {base})")
    return "before the first, between, exact, after the last: offsets 0, 2, 4, none"


def transactions(adapter: Any, ctx: Ctx) -> str:
    txn_id = ctx.name("txn")
    with ctx.step("list/describe an open, then committed transaction"):
        obs = adapter.transactions(ctx, ctx.topic, txn_id)
    if txn_id not in obs["listed"]:
        raise AssertionError(f"{txn_id} not in ListTransactions: {obs['listed']}")
    if obs["listed"][txn_id] != "Ongoing" or obs["open"]["state"] != "Ongoing":
        raise AssertionError(
            f"open transaction listed/described as {obs['listed'][txn_id]}/{obs['open']['state']}"
        )
    if (ctx.topic, 0) not in obs["open"]["partitions"]:
        raise AssertionError(f"described partitions {obs['open']['partitions']}")
    if obs["done"]["state"] != "CompleteCommit":
        raise AssertionError(f"after commit described as {obs['done']['state']}")
    return "open transaction listed and described Ongoing with its partition; CompleteCommit after commit"


def _security_label(ctx: Ctx) -> str:
    mechanism = ctx.security.get("sasl.mechanism")
    identity = ctx.security.get("sasl.username") or ("a client certificate" if "ssl.certificate.location" in ctx.security
                                                     else "no identity")
    return f"{ctx.security.get('security.protocol', 'PLAINTEXT')}{'/' + mechanism if mechanism else ''} as {identity}"


def secured_roundtrip(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(6, prefix="secured")
    with ctx.step(f"produce over {_security_label(ctx)}"):
        adapter.produce(ctx, ctx.topic, records, codec="none", acks="all", idempotent=False)
    with ctx.step(f"consume over {_security_label(ctx)}"):
        got = adapter.read(ctx, ctx.topic, [0], len(records), settle_s=0.3)
    data.assert_same(got, records)
    return f"{len(records)} records written and read back over {_security_label(ctx)}"


AUTHORIZATION_ERROR = re.compile(r"topic.?authori[sz]ation.?failed|not authorized to access topics", re.IGNORECASE)


def acl_denied(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(2, prefix="denied")
    try:
        adapter.produce(ctx, ctx.topic, records, codec="none", acks="all", idempotent=False)
    except Exception as exc:  # noqa: BLE001 - the client's own error is what the row checks
        reported = describe_error(exc)
    else:
        raise AssertionError(f"produce as {_security_label(ctx)} succeeded without any ACL")
    if not AUTHORIZATION_ERROR.search(reported):
        raise AssertionError(f"the client failed, but not with a topic authorization error: {reported[:300]}")
    stored = _stored(ctx, ctx.topic)
    if stored.data_batches:
        raise AssertionError(f"{len(stored.data_batches)} batches stored despite the denial")
    return f"refused as the client reports it ({reported[:120]}); nothing stored"


def acl_txn(adapter: Any, ctx: Ctx) -> str:
    records = data.simple(4, prefix="txn-acl")
    with ctx.step(f"transactional produce + commit as {_security_label(ctx)}"):
        adapter.txn_produce(ctx, ctx.topic, ctx.name("txn"), [(records, "commit")])
    stored = _stored(ctx, ctx.topic)
    if [kind for _o, kind in stored.markers()] != ["COMMIT"]:
        raise AssertionError(f"markers in the log: {stored.markers()}, expected one COMMIT")
    values = [record.value for batch in stored.data_batches for _o, _t, record in batch.iter_absolute()]
    if values != data.values(records):
        raise AssertionError(f"stored values {values}, expected {data.values(records)}")
    return f"{len(records)} records committed with Write on the transactional id and the topic only"


SCENARIOS: dict[str, Scenario] = {
    "connect": Scenario(connect, ("api_versions",)),
    "metadata": Scenario(metadata, ("metadata",)),
    **{f"codec-{c}": Scenario(codec_row(c), ("produce", "read")) for c in CODECS},
    "headers-nulls": Scenario(headers_nulls, ("produce", "read")),
    **{f"acks-{a}": Scenario(acks_row(a), ("produce", "read")) for a in ("0", "1", "all")},
    "idempotent": Scenario(idempotent, ("produce", "read")),
    "txn-commit": Scenario(txn_commit, ("txn_produce", "read")),
    "txn-abort": Scenario(txn_abort, ("txn_produce", "read")),
    "read-committed": Scenario(read_committed, ("read",)),
    "fencing": Scenario(fencing, ("fence", "read")),
    "group-rebalance": Scenario(group_rebalance, ("group_rebalance",)),
    "commit-offsets": Scenario(commit_offsets, ("commit_fetch",)),
    "send-offsets-txn": Scenario(send_offsets, ("send_offsets", "committed", "read")),
    "group-rebalance-kip848": Scenario(functools.partial(group_rebalance, method="group_rebalance_kip848"),
                                       ("group_rebalance_kip848",)),
    "send-offsets-txn-kip848": Scenario(functools.partial(send_offsets, method="send_offsets_kip848"),
                                        ("send_offsets_kip848", "committed", "read")),
    "group-upgrade-kip848": Scenario(group_upgrade, ("group_upgrade",)),
    "admin-topics": Scenario(admin_topics, ("admin_topics",)),
    "admin-configs": Scenario(admin_configs, ("admin_configs",)),
    "admin-replica-assignment": Scenario(replica_assignment, ("broker_ids", "assign_replicas")),
    "config-sources-41": Scenario(config_sources_41, ("config_sources",)),
    "list-config-resources": Scenario(list_config_resources, ("list_config_resources",)),
    "offsets-by-time": Scenario(offsets_by_time, ("offsets_for_times",)),
    "share-group": Scenario(share_group, ("share_consume",)),
    "list-describe-txn": Scenario(transactions, ("transactions",)),
    **{f"sec-{name}": Scenario(secured_roundtrip, ("produce", "read"))
       for name in ("tls", "mtls", "plain", "scram-256", "scram-512")},
    "acl-allowed": Scenario(secured_roundtrip, ("produce", "read")),
    "acl-denied": Scenario(acl_denied, ("produce",)),
    "acl-txn": Scenario(acl_txn, ("txn_produce",)),
}
