"""Group and offset handlers against a real Broker, every version through encode/decode.

Requests are encoded and decoded at the tested version and so are responses, so every assertion
is about what a client reads off the wire. Parked responses (JoinGroup, SyncGroup) are completed
by driving the coordinator's tick, as the server's background task does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.groups import GroupConfig
from rivven_kproto.broker.groups.consumer_protocol import Subscription, encode_subscription
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.delete_groups import DeleteGroupsRequest
from rivven_kproto.codec.messages.describe_groups import DescribeGroupsRequest
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest
from rivven_kproto.codec.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from rivven_kproto.codec.messages.leave_group import LeaveGroupRequest, MemberIdentity
from rivven_kproto.codec.messages.list_groups import ListGroupsRequest
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from rivven_kproto.codec.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from rivven_kproto.codec.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import Pending
from rivven_kproto.server.handlers import (
    HANDLERS,
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)

from . import round_trip

NOW = 1_700_000_000_000
NODE, HOST, PORT = 3, "broker.example", 19092
SUB = encode_subscription(Subscription(("t",), version=1))
GROUP_APIS = {8: (2, 9), 9: (1, 9), 11: (0, 7), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5),
              42: (0, 2), 47: (0, 0)}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    config = BrokerConfig(data_dir=tmp_path / "data", node_id=NODE, advertised_host=HOST, advertised_port=PORT,
                          groups=GroupConfig(initial_rebalance_delay_ms=0))
    broker = Broker(config, NOW)
    broker.create_topic("t", 3, 1, {}, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker) -> RequestContext:
    return RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")


def answer(module: Any, ctx: RequestContext, request: Any, version: int) -> Any:
    """Send at ``version``; a parked answer is completed by ticking the coordinator."""

    def settle(response: Any) -> Any:
        if not isinstance(response, Pending):
            return response
        ctx.broker.groups.tick(ctx.now_ms)
        done = response.complete(ctx.now_ms)
        assert done is not None, "still parked after a tick"
        return done

    return round_trip.answer(module, ctx, request, version, settle)


def parked(module: Any, ctx: RequestContext, request: Any, version: int) -> Pending:
    response = module.handle(ctx, round_trip.wire(request, version), version)
    assert isinstance(response, Pending)
    return response


def join_request(member_id: str = "", **kwargs: Any) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=kwargs.pop("group_id", "g"), session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
        member_id=member_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=SUB)], **kwargs,
    )


def stable_member(ctx: RequestContext, group_id: str = "g") -> tuple[str, int]:
    first = answer(join_group, ctx, join_request(group_id=group_id), 7)
    joined = answer(join_group, ctx, join_request(first.member_id, group_id=group_id), 7)
    sync = SyncGroupRequest(group_id=group_id, generation_id=joined.generation_id, member_id=joined.member_id,
                            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")])
    assert answer(sync_group, ctx, sync, 5).error_code == 0
    return joined.member_id, joined.generation_id


def test_group_apis_are_advertised_with_their_versions() -> None:
    for key, (low, high) in GROUP_APIS.items():
        assert (HANDLERS[key].versions.low, HANDLERS[key].versions.high) == (low, high), key


# -- FindCoordinator ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 4))
def test_find_group_coordinator(ctx: RequestContext, version: int) -> None:
    response = answer(find_coordinator, ctx, FindCoordinatorRequest(key="g", key_type=0), version)
    assert (response.error_code, response.node_id, response.host, response.port) == (0, NODE, HOST, PORT)


def test_find_coordinator_batched_v4(ctx: RequestContext) -> None:
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
    response = answer(find_coordinator, ctx, request, 4)
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators] == [
        ("a", NODE, HOST, PORT, 0), ("b", NODE, HOST, PORT, 0),
    ]
    bad = answer(find_coordinator, ctx, FindCoordinatorRequest(key_type=7, coordinator_keys=["a"]), 4)
    assert bad.coordinators[0].error_code == Errors.INVALID_REQUEST


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------------------


@pytest.mark.parametrize("version", range(0, 8))
def test_join_every_version(ctx: RequestContext, version: int) -> None:
    first = answer(join_group, ctx, join_request(), version)
    if version >= 4:
        assert (first.error_code, first.member_id.startswith("cli-")) == (Errors.MEMBER_ID_REQUIRED, True)
        assert first.protocol_name == ("" if version < 7 else None)
        first = answer(join_group, ctx, join_request(first.member_id), version)
    assert first.error_code == 0 and first.generation_id == 1 and first.leader == first.member_id
    assert first.protocol_name == "range"
    assert first.protocol_type == ("consumer" if version >= 7 else None)
    assert [(m.member_id, m.metadata) for m in first.members] == [(first.member_id, SUB)]
    group = ctx.broker.groups.groups["g"]
    member = group.members[first.member_id]
    assert member.client_host == "/10.0.0.1" and member.client_id == "cli"
    assert member.rebalance_timeout_ms == (30_000 if version >= 1 else 10_000)


def test_join_is_parked_until_the_join_phase_completes(ctx: RequestContext) -> None:
    member, generation = stable_member(ctx)
    pending = parked(join_group, ctx, join_request(), 3)  # a second member: everyone must rejoin
    assert pending.complete(NOW) is None
    assert pending.key == ("group", "g")
    leader = answer(join_group, ctx, join_request(member), 3)
    assert leader.generation_id == generation + 1 and len(leader.members) == 2
    follower = pending.complete(NOW)
    assert follower is not None and follower.generation_id == generation + 1 and follower.members == []


def test_parked_join_expiry_answers_coordinator_not_available_and_releases_the_ticket(ctx: RequestContext) -> None:
    stable_member(ctx)
    pending = parked(join_group, ctx, join_request(), 3)
    response = pending.expire(pending.deadline_ms)
    assert response.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert len(ctx.broker.groups.tickets) == 0


def test_a_parked_join_whose_shard_goes_elsewhere_answers_coordinator_not_available(ctx: RequestContext) -> None:
    """#36: a JoinGroup parked on a group shard that is then handed over (or lost) was never
    answered (nothing here completes it any more): the consumer stalled for its rebalance timeout."""
    stable_member(ctx)
    pending = parked(join_group, ctx, join_request(), 3)
    groups = ctx.broker.groups
    assert pending.complete(NOW) is None
    assert ctx.broker.drop_shard(ctx.broker.shard_of("g")) is not None
    response = pending.complete(NOW)
    assert response is not None and response.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert len(groups.tickets) == 0


@pytest.mark.parametrize("version", range(0, 6))
def test_sync_every_version(ctx: RequestContext, version: int) -> None:
    first = answer(join_group, ctx, join_request(), 7)
    joined = answer(join_group, ctx, join_request(first.member_id), 7)
    request = SyncGroupRequest(
        group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"mine")],
        **({"protocol_type": "consumer", "protocol_name": "range"} if version >= 5 else {}),
    )
    response = answer(sync_group, ctx, request, version)
    assert (response.error_code, response.assignment) == (0, b"mine")
    assert (response.protocol_type, response.protocol_name) == (("consumer", "range") if version >= 5 else (None, None))
    if version >= 5:
        request.protocol_name = "roundrobin"
        assert answer(sync_group, ctx, request, version).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


def test_follower_sync_is_parked_until_the_leader_syncs(ctx: RequestContext) -> None:
    first = answer(join_group, ctx, join_request(), 4)
    second = answer(join_group, ctx, join_request(), 4)
    pending_a = parked(join_group, ctx, join_request(first.member_id), 4)
    pending_b = parked(join_group, ctx, join_request(second.member_id), 4)
    ctx.broker.groups.tick(NOW)
    a, b = pending_a.complete(NOW), pending_b.complete(NOW)
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    waiting = parked(sync_group, ctx, SyncGroupRequest(group_id="g", generation_id=1, member_id=follower.member_id), 4)
    assert waiting.complete(NOW) is None
    assignments = [SyncGroupRequestAssignment(member_id=m, assignment=m.encode())
                   for m in (leader.member_id, follower.member_id)]
    sync = SyncGroupRequest(group_id="g", generation_id=1, member_id=leader.member_id, assignments=assignments)
    assert answer(sync_group, ctx, sync, 4).assignment == leader.member_id.encode()
    assert waiting.complete(NOW).assignment == follower.member_id.encode()


@pytest.mark.parametrize("version", range(0, 5))
def test_heartbeat_every_version(ctx: RequestContext, version: int) -> None:
    member, generation = stable_member(ctx)
    request = HeartbeatRequest(group_id="g", generation_id=generation, member_id=member)
    assert answer(heartbeat, ctx, request, version).error_code == 0
    request.generation_id += 1
    assert answer(heartbeat, ctx, request, version).error_code == Errors.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", range(0, 6))
def test_leave_every_version(ctx: RequestContext, version: int) -> None:
    member, _ = stable_member(ctx)
    if version >= 3:
        request = LeaveGroupRequest(group_id="g", members=[
            MemberIdentity(member_id=member, reason="bye" if version >= 5 else None),
            MemberIdentity(member_id="ghost"),
        ])
        response = answer(leave_group, ctx, request, version)
        assert response.error_code == 0
        assert [(m.member_id, m.error_code) for m in response.members] == [
            (member, 0), ("ghost", Errors.UNKNOWN_MEMBER_ID),
        ]
    else:
        response = answer(leave_group, ctx, LeaveGroupRequest(group_id="g", member_id=member), version)
        assert response.error_code == 0
        again = answer(leave_group, ctx, LeaveGroupRequest(group_id="g", member_id=member), version)
        assert again.error_code == Errors.UNKNOWN_MEMBER_ID
    assert ctx.broker.groups.describe("g").state == "Empty"


# -- offsets --------------------------------------------------------------------------------------


def commit_request(group_id: str = "g", generation: int = -1, member: str = "", **offsets: Any) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for key, offset in offsets.items():
        topic, partition = key.rsplit("_", 1)
        topics.setdefault(topic, []).append(OffsetCommitRequestPartition(
            partition_index=int(partition), committed_offset=offset, committed_metadata=f"md{offset}",
            committed_leader_epoch=7))
    return OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation, member_id=member,
                               topics=[OffsetCommitRequestTopic(name=n, partitions=p) for n, p in topics.items()])


def commit_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(2, 10))
def test_commit_and_fetch_every_version(ctx: RequestContext, version: int) -> None:
    response = answer(offset_commit, ctx, commit_request(t_0=10, t_2=12, t_7=1, nope_0=5), version)
    assert commit_errors(response) == {
        ("t", 0): 0, ("t", 2): 0, ("t", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    for fetch_version in (1, 5, 7):
        fetched = answer(offset_fetch, ctx, OffsetFetchRequest(
            group_id="g", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]), fetch_version)
        assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in fetched.topics[0].partitions] \
            == [(0, 10, "md10", 0), (1, -1, "", 0)]
        epoch = fetched.topics[0].partitions[0].committed_leader_epoch
        assert epoch == (7 if fetch_version >= 5 and version >= 6 else -1)  # epochs: commit v6+, fetch v5+


def test_offset_fetch_all_topics_and_batched_groups(ctx: RequestContext) -> None:
    answer(offset_commit, ctx, commit_request(t_1=4, t_0=3), 8)
    answer(offset_commit, ctx, commit_request("h", t_2=9), 8)
    every = answer(offset_fetch, ctx, OffsetFetchRequest(group_id="g", topics=None), 2)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in every.topics] == [
        ("t", [(0, 3), (1, 4)]),
    ]
    request = OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id="g", topics=None),
        OffsetFetchRequestGroup(group_id="h", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[2, 0])]),
        OffsetFetchRequestGroup(group_id="unknown", topics=None),
    ], require_stable=True)
    for version in (8, 9):
        response = answer(offset_fetch, ctx, request, version)
        assert [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                                            for t in g.topics]) for g in response.groups] == [
            ("g", 0, [("t", [(0, 3), (1, 4)])]),
            ("h", 0, [("t", [(2, 9), (0, -1)])]),
            ("unknown", 0, []),
        ]


def test_commit_generation_checks_apply_to_every_known_partition(ctx: RequestContext) -> None:
    member, generation = stable_member(ctx)
    ok = answer(offset_commit, ctx, commit_request(generation=generation, member=member, t_0=1), 8)
    assert commit_errors(ok) == {("t", 0): 0}
    stale = answer(offset_commit, ctx, commit_request(generation=generation + 1, member=member, t_0=2, t_1=2, x_0=1), 8)
    assert commit_errors(stale) == {
        ("t", 0): Errors.ILLEGAL_GENERATION, ("t", 1): Errors.ILLEGAL_GENERATION, ("x", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    unknown_group = commit_request("nobody", generation=3, member="m", t_0=1)
    assert commit_errors(answer(offset_commit, ctx, unknown_group, 8)) == {("t", 0): Errors.ILLEGAL_GENERATION}
    assert commit_errors(answer(offset_commit, ctx, unknown_group, 9)) == {("t", 0): Errors.GROUP_ID_NOT_FOUND}


def test_offset_delete(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("u", 1, 1, {}, NOW)
    member, generation = stable_member(ctx)
    answer(offset_commit, ctx, commit_request(generation=generation, member=member, t_0=1, u_0=2), 8)
    request = OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequestTopic(name=name, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for name in ("t", "u")
    ])
    response = answer(offset_delete, ctx, request, 0)
    assert response.error_code == 0
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        ("t", [(0, Errors.GROUP_SUBSCRIBED_TO_TOPIC)]), ("u", [(0, 0)]),
    ]
    request.group_id = "nope"
    assert answer(offset_delete, ctx, request, 0).error_code == Errors.GROUP_ID_NOT_FOUND


# -- DescribeGroups / ListGroups / DeleteGroups ---------------------------------------------------


@pytest.mark.parametrize("version", range(0, 6))
def test_describe_every_version(ctx: RequestContext, version: int) -> None:
    member, _ = stable_member(ctx)
    request = DescribeGroupsRequest(groups=["g", "nope"], include_authorized_operations=version >= 3)
    response = answer(describe_groups, ctx, request, version)
    stable, dead = response.groups
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        0, "Stable", "consumer", "range")
    [m] = stable.members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) == (
        member, "cli", "/10.0.0.1", SUB, b"A")
    assert (dead.error_code, dead.group_state, dead.members) == (0, "Dead", [])
    if version >= 3:
        assert stable.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    else:
        assert stable.authorized_operations == -(2**31)


@pytest.mark.parametrize("version", range(0, 6))
def test_list_every_version(ctx: RequestContext, version: int) -> None:
    stable_member(ctx)
    answer(offset_commit, ctx, commit_request("simple", t_0=1), 8)
    response = answer(list_groups, ctx, ListGroupsRequest(), version)
    listed = sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in response.groups)
    stable, empty = ("Stable", "Empty") if version >= 4 else ("", "")
    kind = "classic" if version >= 5 else ""
    assert listed == [("g", "consumer", stable, kind), ("simple", "", empty, kind)]
    if version >= 4:
        only = answer(list_groups, ctx, ListGroupsRequest(states_filter=["empty"]), version)
        assert [g.group_id for g in only.groups] == ["simple"]
    if version >= 5:
        none = answer(list_groups, ctx, ListGroupsRequest(types_filter=["consumer"]), version)
        assert none.groups == []
        classic = answer(list_groups, ctx, ListGroupsRequest(types_filter=["Classic"]), version)
        assert len(classic.groups) == 2


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_groups_every_version(ctx: RequestContext, version: int) -> None:
    stable_member(ctx)
    answer(offset_commit, ctx, commit_request("simple", t_0=1), 8)
    response = answer(delete_groups, ctx, DeleteGroupsRequest(groups_names=["g", "simple", "nope"]), version)
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("g", Errors.NON_EMPTY_GROUP), ("simple", 0), ("nope", Errors.GROUP_ID_NOT_FOUND),
    ]


async def test_the_server_wakes_parked_joins_when_a_shard_stops_being_served(
        broker: Broker, autojump_clock: trio.abc.Clock) -> None:
    """The wake-up half: after a shard is dropped, the next ``wake_unserved_groups`` wakes every
    parked group request (long before its rebalance timeout), and those of the dropped shard answer."""
    from rivven_kproto.server.app import Server
    from rivven_kproto.server.durability import wall_clock_ms

    server = Server(broker, broker.config)
    ctx = RequestContext(broker, broker.config, wall_clock_ms(), "cli", "/10.0.0.1")  # the server's clock
    stable_member(ctx)
    server.wake_unserved_groups()  # notes the shards served
    pending = parked(join_group, ctx, join_request(), 3)
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        async def wait() -> None:
            answers.append(await server.delayed.wait(pending))

        nursery.start_soon(wait)
        await trio.sleep(1)
        assert answers == []
        broker.drop_shard(broker.shard_of("g"))
        server.wake_unserved_groups()
        with trio.fail_after(1):  # the rebalance timeout is 30 s
            while not answers:
                await trio.sleep(0.01)
    assert answers[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE


async def test_a_request_wakes_the_parked_requests_of_the_groups_it_changed(
        broker: Broker, autojump_clock: trio.abc.Clock) -> None:
    """Wake-ups are an effect the group coordinator reports as it answers a parked request, not a
    pass the server makes after every request: the member's rejoin completes the join phase, and
    the new member's parked join answers, with nothing else called, long before its rebalance
    timeout."""
    from rivven_kproto.server.app import Server
    from rivven_kproto.server.durability import wall_clock_ms

    server = Server(broker, broker.config)
    ctx = RequestContext(broker, broker.config, wall_clock_ms(), "cli", "/10.0.0.1")
    member_id, _ = stable_member(ctx)
    pending = parked(join_group, ctx, join_request(), 3)  # a new member: the group rebalances
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        async def wait() -> None:
            answers.append(await server.delayed.wait(pending))

        nursery.start_soon(wait)
        await trio.sleep(1)
        assert answers == []
        rejoin = RequestContext(broker, broker.config, wall_clock_ms(), "cli", "/10.0.0.1")
        join_group.handle(rejoin, join_request(member_id), 3)  # the last member rejoins: the phase ends
        with trio.fail_after(1):  # the rebalance timeout is 30 s
            while not answers:
                await trio.sleep(0.01)
    assert answers[0].error_code == 0 and answers[0].generation_id == 2
