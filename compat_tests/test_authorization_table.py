"""Issue #37: every served API x version x principal answers as Kafka's authorization table says.

One secured broker (StandardAuthorizer, no ACL means no access, super user ``admin``). For each
API (rivven_kproto/broker/security/authorization_rules.py) four callers send a minimal request
per version and shape (compat_tests/authz_requests.py) on one reused raw connection each:
anonymous (PLAINTEXT), ``noacl`` (SASL, no ACL), ``g<key>`` (exactly the row's ACLs) and
``d<key>`` (the same plus a DENY of one of them). The answer's authorization errors (and, for rows
that filter, whether the resource is listed) must be what the table predicts from those ACLs.
"""

from __future__ import annotations

import logging
import re
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.broker.security.authorization_rules import RULES, Check, Rule, Scope
from rivven_kproto.codec.acls import (
    OPERATIONS_NOT_REQUESTED,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from rivven_kproto.codec.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from rivven_kproto.codec.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from rivven_kproto.codec.messages.create_acls import AclCreation, CreateAclsRequest
from rivven_kproto.codec.messages.create_topics import CreatableTopic, CreateTopicsRequest
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest
from rivven_kproto.codec.messages.list_groups import ListGroupsRequest
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest
from rivven_kproto.codec.messages.share_group_describe import ShareGroupDescribeRequest
from rivven_kproto.codec.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from rivven_kproto.codec.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareOffsetsRequestPartition,
    AlterShareOffsetsRequestTopic,
)
from rivven_kproto.server.handlers import HANDLERS

from . import raw_client
from .authz_requests import FACTORIES, LOGIN_APIS, Names

log = logging.getLogger(__name__)

TOPIC = "authz"
CLUSTER = "kafka-cluster"
SASL_PORT = re.compile(r"listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) listening on [\d.]+:(\d+)")
AUTH_ERRORS = frozenset({Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED,
                         Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
ERROR_FIELDS = frozenset({"error_code", "partition_error_code", "topic_config_error_code"})
CHECKED = sorted(key for key, row in RULES.items() if row.checks)
CASES = ("anonymous", "noacl", "denied", "granted")  # granted last: it may delete DeleteTopics' topic
# (api key, check label) whose DENY case is expected to fail until another branch lands, marked
# xfail(strict=True) so that it flips when it does. Empty: wip-leaks (InitProducerId's idempotent
# check, OffsetDelete/DescribeTransactions/ConsumerGroupHeartbeat/ConsumerGroupDescribe topic
# checks) is merged.
PENDING: dict[tuple[int, str], str] = {}
# Checks granted (and denied) through their alternative: InitProducerId's idempotent check through
# Write on a topic (Kafka counts DENYs on topics there), ListGroups through Describe on the Cluster,
# WriteTxnMarkers through Alter on the Cluster.
THROUGH_ALTERNATIVE = {22: "idempotent", 16: "group", 27: "cluster"}
# Metadata's last check is auto-creation, which the walk does not ask for: deny Describe instead.
DENIED_CHECK = {3: "topic"}
WAIT_S = 30.0

Grant = tuple[ResourceType, Operation]


DELETED = "authz-del"  # DeleteTopics' existing topic: refused to the others, deleted by g20


TOPIC_IDS: dict[str, uuid.UUID] = {}  # the created topics' ids (``prepare``)


def names(key: int) -> Names:
    """Resources of one API's requests: its own group and transactional id, the shared topic."""
    topic = DELETED if key == 20 else TOPIC
    return Names(topic=topic, group=f"authz-g{key}", transactional_id=f"authz-x{key}",
                 missing_topic=f"authz-gone{key}", topic_id=TOPIC_IDS.get(topic, uuid.UUID(int=0)))


def resource_names(key: int, resource_type: ResourceType) -> list[str]:
    n = names(key)
    if resource_type == ResourceType.TOPIC:
        return {19: [n.missing_topic], 20: [n.missing_topic, n.topic]}.get(key, [n.topic])
    return [{ResourceType.GROUP: n.group, ResourceType.TRANSACTIONAL_ID: n.transactional_id,
             ResourceType.CLUSTER: CLUSTER}[resource_type]]


def grant_of(row: Rule, check: Check) -> Grant:
    """The ACL a check needs: its operation, or its alternative's (see THROUGH_ALTERNATIVE)."""
    if THROUGH_ALTERNATIVE.get(row.api_key) == check.label:
        return check.alternatives[0].resource_type, check.alternatives[0].operation
    return check.resource_type, check.operation


def grants(row: Rule) -> list[Grant]:
    """Exactly the row's ACLs."""
    return list(dict.fromkeys(grant_of(row, check) for check in row.checks))


def denied_grant(row: Rule) -> tuple[Grant, str]:
    """The DENY added for ``d<key>``: the last check's (earlier checks let the request reach it)."""
    check = row.check(DENIED_CHECK.get(row.api_key, row.checks[-1].label))
    return grant_of(row, check), check.label


@dataclass(frozen=True)
class Expected:
    errors: frozenset[int]
    present: str | None = None  # a name the answer must list
    absent: str | None = None  # a name the answer must not list
    deciding: Check | None = None
    operations: bool | None = None  # cluster_authorized_operations shown (True) or withheld as 0 (False)


def permitted(check: Check, allowed: set[Grant], denied: set[Grant]) -> bool:
    options = [(check.resource_type, check.operation)] + [(g.resource_type, g.operation) for g in check.alternatives]
    return any(option in allowed and option not in denied for option in options)


def token(key: int, check: Check) -> str:
    """The name a filtering check's resource is listed under in the answer."""
    if check.resource_type in (ResourceType.TOPIC, ResourceType.CLUSTER):
        return TOPIC
    return resource_names(key, check.resource_type)[0]


def expect(row: Rule, version: int, shape: str, allowed: set[Grant], denied: set[Grant]) -> Expected:
    """The table's answer: the first refused check decides; none refused lists every filtered name."""
    applying = row.applying(version, shape)
    for check in applying:
        if not permitted(check, allowed, denied):
            if check.scope is Scope.FILTER:
                return Expected(frozenset(), absent=token(row.api_key, check), deciding=check)
            if check.error is None:  # DETAILS without an error: the bit set is withheld
                return Expected(frozenset(), deciding=check, operations=False)
            return Expected(frozenset({int(check.error)}), deciding=check)
    filtered = [c for c in applying if c.scope is Scope.FILTER]
    shown = any(c.scope is Scope.DETAILS and c.error is None for c in applying) or None
    return Expected(frozenset(), present=token(row.api_key, filtered[0]) if filtered else None, operations=shown)


def principal_acls(case: str, row: Rule) -> tuple[set[Grant], set[Grant]]:
    if case in ("anonymous", "noacl"):
        return set(), set()
    allowed = set(grants(row))
    return allowed, ({denied_grant(row)[0]} if case == "denied" else set())


def walk(obj: Any) -> Iterator[tuple[str, Any]]:
    """Every (field name, value) of a decoded response, nested structs and lists included."""
    if is_dataclass(obj):
        for f in fields(obj):
            value = getattr(obj, f.name)
            yield f.name, value
            yield from walk(value)
    elif isinstance(obj, list):
        for item in obj:
            yield "", item
            yield from walk(item)


def observed(response: Any) -> tuple[frozenset[int], set[str]]:
    errors = frozenset(v for k, v in walk(response) if k in ERROR_FIELDS and v in AUTH_ERRORS)
    strings = {v for _, v in walk(response) if isinstance(v, str)}
    return errors, strings


def operations_ok(response: Any, shown: bool | None) -> bool:
    """The cluster's authorized-operations bit set: some bits when shown, 0 when withheld."""
    values = [v for k, v in walk(response) if k == "cluster_authorized_operations"]
    if shown is None or not values:
        return True
    return all(v not in (0, OPERATIONS_NOT_REQUESTED) for v in values) if shown else all(v == 0 for v in values)


def cluster_operations(response: Any) -> str:
    values = [v for k, v in walk(response) if k == "cluster_authorized_operations"]
    return f", cluster operations {values}" if values else ""


def all_errors(response: Any) -> set[str]:
    return {Errors(v).name for k, v in walk(response) if k in ERROR_FIELDS and v in Errors._value2member_map_}


class Connection:
    """One caller's connection, reused for every request it sends."""

    def __init__(self, address: str, user: str | None) -> None:
        self.sock = raw_client.connect(address)
        self.correlation = 0
        if user is not None:
            login(self, user)

    def call(self, request: Any, version: int) -> Any:
        self.correlation += 1
        return raw_client.call(self.sock, request, version, self.correlation)

    def close(self) -> None:
        self.sock.close()


def login(conn: Connection, user: str, handshake_version: int = 1, authenticate_version: int = 2) -> list[Any]:
    """SASL/PLAIN; a v0 handshake is followed by the bare token (no Kafka framing of the request)."""
    token_bytes = f"\x00{user}\x00{user}-pw".encode()
    answers = [conn.call(SaslHandshakeRequest(mechanism="PLAIN"), handshake_version)]
    if handshake_version == 0:
        conn.sock.sendall(struct.pack(">i", len(token_bytes)) + token_bytes)
        raw_client.read_frame(conn.sock)  # an empty challenge: accepted (a refusal closes the connection)
        return answers
    answers.append(conn.call(SaslAuthenticateRequest(auth_bytes=token_bytes), authenticate_version))
    assert answers[-1].error_code == Errors.NONE, answers[-1]
    return answers


@dataclass
class Secured:
    base: Path
    plaintext: str
    sasl: str
    connections: dict[str, Connection] = field(default_factory=dict)

    def connection(self, user: str | None) -> Connection:
        key = user or "<anonymous>"
        if key not in self.connections:
            self.connections[key] = Connection(self.sasl if user else self.plaintext, user)
        return self.connections[key]


def users() -> list[str]:
    return ["admin", "noacl"] + [f"{p}{key}" for key in CHECKED for p in "gd"]


def start_broker(base: Path) -> Any:
    from .broker_process import BrokerProcess

    jaas = " ".join(f'user_{u}="{u}-pw"' for u in users())
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {jaas};\n"
        "group.initial.rebalance.delay.ms=0\n"
    )
    return BrokerProcess(base / "data", base / "broker.log", ["--config", str(config)]).start()


def acls(key: int, user: str, grant: Grant, permission: Permission) -> list[AclCreation]:
    resource_type, operation = grant
    return [AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=PatternType.LITERAL,
                        principal=f"User:{user}", host="*", operation=operation, permission_type=permission)
            for name in resource_names(key, resource_type)]


def prepare(admin: Connection) -> None:
    """The resources the filtering rows list, then every principal's ACLs."""
    topics = [CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in (TOPIC, DELETED)]
    created = admin.call(CreateTopicsRequest(topics=topics), 7)
    assert all(t.error_code == Errors.NONE for t in created.topics), created
    TOPIC_IDS.update({t.name: t.topic_id for t in created.topics})
    # A group with an offset: OffsetFetch of all topics and ListGroups list it; OffsetDelete's topic
    # check shows only on an existing group (Kafka answers an unknown one GROUP_ID_NOT_FOUND alone).
    for key in (9, 16, 47):
        commit = OffsetCommitRequest(group_id=names(key).group, generation_id_or_member_epoch=-1, member_id="",
                                     topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                         OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                      committed_metadata="")])])
        answer = admin.call(commit, 2)
        assert answer.topics[0].partitions[0].error_code == Errors.NONE, answer
    for key in (65, 66):  # DescribeTransactions (an ongoing one, on the topic), ListTransactions
        txn = names(key).transactional_id
        init = admin.call(InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=120_000), 4)
        assert init.error_code == Errors.NONE, init
        if key == 65:
            added = admin.call(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=txn, v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]), 3)
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, added
    join_consumer_group(admin, names(69).group)
    join_share_group(admin, names(77).group)
    for key in (90, 92):  # share-group state on the topic: listed by DescribeShareGroupOffsets, deletable
        alter = AlterShareGroupOffsetsRequest(group_id=names(key).group, topics=[AlterShareOffsetsRequestTopic(
            topic_name=TOPIC, partitions=[AlterShareOffsetsRequestPartition(partition_index=0, start_offset=0)])])
        answer = admin.call(alter, 0)
        assert answer.error_code == Errors.NONE and answer.responses[0].partitions[0].error_code == 0, answer
    creations = []
    for key in CHECKED:
        row = RULES[key]
        for grant in grants(row):
            creations += acls(key, f"g{key}", grant, Permission.ALLOW) + acls(key, f"d{key}", grant, Permission.ALLOW)
        creations += acls(key, f"d{key}", denied_grant(row)[0], Permission.DENY)
    answer = admin.call(CreateAclsRequest(creations=creations), 3)
    assert all(r.error_code == Errors.NONE for r in answer.results), answer


def join_consumer_group(admin: Connection, group: str) -> None:
    """A KIP-848 member assigned the topic (ConsumerGroupDescribe's topic check looks at it)."""
    member = str(uuid.uuid4())
    request = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                            rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC],
                                            topic_partitions=[])
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = admin.call(request, 1)
        assert answer.error_code == Errors.NONE, answer
        if answer.assignment is not None and answer.assignment.topic_partitions:
            break
        assert time.monotonic() < deadline, f"no assignment for {group}: {answer}"
        request = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=answer.member_epoch,
                                                topic_partitions=[])
        time.sleep(0.05)
    described = admin.call(ConsumerGroupDescribeRequest(group_ids=[group]), 0)
    assert TOPIC in observed(described)[1], described


def join_share_group(admin: Connection, group: str) -> None:
    """A share-group member assigned the topic (ShareGroupDescribe's topic check looks at it)."""
    request = ShareGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                         subscribed_topic_names=[TOPIC])
    answer = admin.call(request, 1)
    assert answer.error_code == Errors.NONE and answer.assignment is not None, answer
    assert answer.assignment.topic_partitions, answer
    described = admin.call(ShareGroupDescribeRequest(group_ids=[group]), 1)
    assert TOPIC in observed(described)[1], described


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("authz")
    broker = start_broker(base)
    result = Secured(base, broker.bootstrap, f"127.0.0.1:{SASL_PORT.findall(broker.log_text())[-1]}")
    try:
        prepare(result.connection("admin"))
        yield result
    finally:
        for conn in result.connections.values():
            conn.close()
        broker.stop()


def case_user(case: str, key: int) -> str | None:
    return {"anonymous": None, "noacl": "noacl", "granted": f"g{key}", "denied": f"d{key}"}[case]


def params() -> list[Any]:
    out = []
    for key in CHECKED:
        row = RULES[key]
        for case in CASES:
            marks = []
            reason = PENDING.get((key, denied_grant(row)[1]))
            if case == "denied" and reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param(key, case, id=f"{row.name}-{case}", marks=marks))
    return out


@pytest.mark.parametrize(("key", "case"), params())
def test_answers_follow_the_table(secured: Secured, key: int, case: str) -> None:
    row = RULES[key]
    conn = secured.connection(case_user(case, key))
    allowed, denied = principal_acls(case, row)
    handler = HANDLERS[key]
    wrong = []
    for version in range(handler.versions.low, handler.versions.high + 1):
        for shape, request in FACTORIES[key](version, names(key)):
            want = expect(row, version, shape, allowed, denied)
            response = conn.call(request, version)
            errors, strings = observed(response)
            listed_ok = (want.present is None or want.present in strings) and (
                want.absent is None or want.absent not in strings) and operations_ok(response, want.operations)
            if errors != want.errors or not listed_ok:
                wrong.append(f"v{version} {shape or 'plain'}: got {sorted(Errors(e).name for e in errors)}"
                             f"{' listing ' + repr(sorted(strings & {TOPIC, names(key).group, names(key).transactional_id}))}"
                             f", table: {sorted(Errors(e).name for e in want.errors)}"
                             f"{f' listing {want.present!r}' if want.present else ''}"
                             f"{f' without {want.absent!r}' if want.absent else ''}"
                             f"{'' if want.operations is None else f' cluster operations shown: {want.operations}'}"
                             f" (every error in the answer: {sorted(all_errors(response))}"
                             f"{cluster_operations(response)})")
    assert not wrong, f"{row.name} as {case}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("key", sorted(k for k, row in RULES.items() if not row.checks and k not in LOGIN_APIS))
def test_apis_without_a_check_refuse_nobody(secured: Secured, key: int) -> None:
    for user in (None, "noacl"):
        conn = secured.connection(user)
        for version in range(HANDLERS[key].versions.low, HANDLERS[key].versions.high + 1):
            for _, request in FACTORIES[key](version, names(key)):
                assert observed(conn.call(request, version))[0] == frozenset(), (key, version, user)


def test_login_apis_at_every_version_refuse_nobody(secured: Secured) -> None:
    """SaslHandshake and SaslAuthenticate (rows without a check): every version logs ``noacl`` in."""
    for handshake in range(HANDLERS[17].versions.low, HANDLERS[17].versions.high + 1):
        for authenticate in range(HANDLERS[36].versions.low, HANDLERS[36].versions.high + 1):
            if handshake == 0 and authenticate > 0:
                continue  # a v0 handshake carries the token unframed: no SaslAuthenticate version
            conn = Connection(secured.sasl, None)
            try:
                for answer in login(conn, "noacl", handshake, authenticate):
                    assert observed(answer)[0] == frozenset()
            finally:
                conn.close()


def test_every_served_api_is_walked() -> None:
    """A served API the walk cannot send (no factory, not a login API) fails here."""
    assert sorted(set(HANDLERS) - set(FACTORIES) - LOGIN_APIS) == []
    assert sorted(set(HANDLERS) - set(RULES)) == []


def test_cluster_operations_are_shown_only_with_describe_on_the_cluster(secured: Secured) -> None:
    """``g24`` holds ClusterAction (AddPartitionsToTxn v4+), which implies no Describe: Kafka shows
    it 0, not its ClusterAction bit; ``g29`` (Describe on the Cluster) sees its bits."""
    for key in (60, 3):
        for version in range(max(HANDLERS[key].versions.low, 8 if key == 3 else 0),
                             min(HANDLERS[key].versions.high, 10 if key == 3 else 99) + 1):
            request = FACTORIES[key](version, names(key))[0][1]
            hidden = [v for k, v in walk(secured.connection("g24").call(request, version))
                      if k == "cluster_authorized_operations"]
            shown = [v for k, v in walk(secured.connection("g29").call(request, version))
                     if k == "cluster_authorized_operations"]
            assert hidden == [0] and shown == [1 << Operation.DESCRIBE], (key, version, hidden, shown)


def test_list_groups_lists_share_groups_as_the_table_says(secured: Secured) -> None:
    """ListGroups' filter (Describe on the group, or on the Cluster for every group) applies to
    share groups too: ``g16`` (Describe on the Cluster) sees the share group of the ShareGroupDescribe
    row, ``noacl`` does not, ``g77`` (Describe on that group) does."""
    share_group = names(77).group
    for user, listed in (("g16", True), ("noacl", False), ("g77", True)):
        answer = secured.connection(user).call(ListGroupsRequest(types_filter=["share"]), 5)
        assert (share_group in {g.group_id for g in answer.groups}) is listed, (user, answer)
