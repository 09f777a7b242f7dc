"""Kafka's authorization rules, written down once as data: which checks each API makes, in order.

Reference: Kafka's "Operations and Resources on Protocols" table and its KafkaApis handlers (4.x).
Every API the broker serves has a :class:`Rule` in ``RULES`` (a unit test fails on a served API
without one; APIs without a check have an explicit empty row). A rule's checks are made in their
order; the first refused one decides the answer for the resource it names:

- ``Scope.REQUEST``: the whole request is refused (a top-level error, or every entry carries it);
- ``Scope.ENTRY``: only that entry (topic, partition, group, transactional id, config resource);
- ``Scope.FILTER``: the entry is silently left out of the answer (Kafka's "list what you may see");
- ``Scope.DETAILS``: the entry is answered, but what describes it is withheld: behind the error
  (CreateTopics' configs: ``topic_config_error_code``), or, without an error, as an empty
  ``cluster_authorized_operations`` bit set (0).

A check applies only at ``versions`` (None: all) and only to the request shapes named in ``when``
(empty: all), e.g. FindCoordinator's key type. ``alternatives`` allow instead (Create on the
Cluster for CreateTopics). Handlers read their checks from here (``RequestContext.refusal``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rivven_kproto.codec.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors

__all__ = ["RULES", "Check", "Grant", "Rule", "Scope", "Source", "rule"]


class Scope(enum.Enum):
    """What a refusal answers (see the module docstring)."""

    REQUEST = "request"
    ENTRY = "entry"
    FILTER = "filter"
    DETAILS = "details"


class Source(enum.Enum):
    """Where a check's resource name comes from."""

    CLUSTER = "the cluster (kafka-cluster)"
    TOPIC = "each topic entry's name (or the name its topic id resolves to)"
    GROUP = "the request's group id"
    GROUPS = "each group id in the request"
    LISTED_GROUP = "each group the broker would list"
    TRANSACTIONAL_ID = "the request's transactional id"
    TRANSACTIONAL_IDS = "each transactional id in the request"
    LISTED_TRANSACTION = "each transactional id the broker would list"
    COORDINATOR_KEY = "each coordinator key"
    CONFIG_RESOURCE = "each config resource's name (topic) or the cluster (broker)"
    ANY_TOPIC = "any topic (an ALLOW on some topic)"


@dataclass(frozen=True)
class Grant:
    """An operation on a resource type, whose name is taken from ``source``."""

    resource_type: ResourceType
    operation: Operation
    source: Source = Source.CLUSTER


@dataclass(frozen=True)
class Check:
    """One authorization check of an API: a refusal gives ``error`` (None: filtered) at ``scope``."""

    label: str
    resource_type: ResourceType
    operation: Operation
    source: Source
    error: Errors | None
    scope: Scope
    versions: tuple[int, int] | None = None
    when: frozenset[str] = frozenset()
    alternatives: tuple[Grant, ...] = ()

    def applies(self, version: int, shape: str = "") -> bool:
        in_versions = self.versions is None or self.versions[0] <= version <= self.versions[1]
        return in_versions and (not self.when or shape in self.when)


@dataclass(frozen=True)
class Rule:
    """Every check one API makes, in Kafka's order."""

    api_key: int
    name: str
    checks: tuple[Check, ...]
    note: str = ""

    def check(self, label: str) -> Check:
        for check in self.checks:
            if check.label == label:
                return check
        raise KeyError(f"{self.name} has no check {label!r}")

    def applying(self, version: int, shape: str = "") -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.applies(version, shape))


T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
O = Operation  # noqa: E741
REQUEST, ENTRY, FILTER = Scope.REQUEST, Scope.ENTRY, Scope.FILTER
TOPIC_DENIED, GROUP_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED, TXN_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CREATE_ON_CLUSTER = (Grant(C, O.CREATE),)
DELETE_ON_CLUSTER = (Grant(C, O.DELETE),)


def _cluster(label: str, operation: Operation, scope: Scope = REQUEST, **kw: object) -> Check:
    return Check(label, C, operation, Source.CLUSTER, CLUSTER_DENIED, scope, **kw)  # type: ignore[arg-type]


def _txn(label: str = "transactional_id", **kw: object) -> Check:
    return Check(label, X, O.WRITE, Source.TRANSACTIONAL_ID, TXN_DENIED, REQUEST, **kw)  # type: ignore[arg-type]


def _group(operation: Operation, scope: Scope = REQUEST, source: Source = Source.GROUP, **kw: object) -> Check:
    return Check("group", G, operation, source, GROUP_DENIED, scope, **kw)  # type: ignore[arg-type]


def _topic(operation: Operation, scope: Scope = ENTRY, **kw: object) -> Check:
    return Check("topic", T, operation, Source.TOPIC, TOPIC_DENIED, scope, **kw)  # type: ignore[arg-type]


# Kafka's AuthHelper: the client's own rights on the cluster are shown only with Describe on it.
CLUSTER_OPERATIONS_SHOWN = Check("cluster_operations", C, O.DESCRIBE, Source.CLUSTER, None, Scope.DETAILS)


def _rules(*rules: Rule) -> dict[int, Rule]:
    return {r.api_key: r for r in rules}


RULES: dict[int, Rule] = _rules(
    Rule(0, "Produce", (
        _txn(versions=(3, 12), when=frozenset({"transactional"})),
        _topic(O.WRITE, versions=(3, 12)),
    ), "Transactional records need Write on the transactional id (else every partition refused). v0-2 are "
       "advertised but answered UNSUPPORTED_VERSION before any check, as Kafka 4 (KAFKA-18659)."),
    Rule(1, "Fetch", (
        Check("follower", C, O.CLUSTER_ACTION, Source.CLUSTER, TOPIC_DENIED, REQUEST, when=frozenset({"follower"})),
        _topic(O.READ, when=frozenset({""})),
    ), "A follower's fetch (replica id >= 0) needs ClusterAction instead of Read on the topics; a refusal "
       "gives each partition TOPIC_AUTHORIZATION_FAILED."),
    Rule(2, "ListOffsets", (_topic(O.DESCRIBE),)),
    Rule(3, "Metadata", (
        _topic(O.DESCRIBE, when=frozenset({"", "named"})),
        Check("listed", T, O.DESCRIBE, Source.TOPIC, None, FILTER, when=frozenset({"all"})),
        Check("create", T, O.CREATE, Source.TOPIC, TOPIC_DENIED, ENTRY, when=frozenset({"auto_create"}),
              alternatives=CREATE_ON_CLUSTER),
        Check("cluster_operations", C, O.DESCRIBE, Source.CLUSTER, None, Scope.DETAILS, versions=(8, 10)),
    ), "All-topics requests list only describable topics; the cluster's authorized operations (v8-10, when asked "
       "for) need Describe on the Cluster, else 0."),
    Rule(8, "OffsetCommit", (_group(O.READ), _topic(O.READ))),
    Rule(9, "OffsetFetch", (
        _group(O.DESCRIBE, ENTRY, Source.GROUPS),
        _topic(O.DESCRIBE, when=frozenset({"", "named"})),
        Check("listed", T, O.DESCRIBE, Source.TOPIC, None, FILTER, when=frozenset({"all"})),
    ), "v2-7: one group, a top-level error; v8+: per group; v0-1 have no top-level error, so a refused group's "
       "error is put on every requested partition (Kafka 3.x; 4.x's coordinator path drops it with the topics)."),
    Rule(10, "FindCoordinator", (
        Check("group", G, O.DESCRIBE, Source.COORDINATOR_KEY, GROUP_DENIED, ENTRY, when=frozenset({"", "group"})),
        Check("transactional_id", X, O.DESCRIBE, Source.COORDINATOR_KEY, TXN_DENIED, ENTRY,
              when=frozenset({"transaction"})),
    )),
    Rule(11, "JoinGroup", (_group(O.READ),)),
    Rule(12, "Heartbeat", (_group(O.READ),)),
    Rule(13, "LeaveGroup", (_group(O.READ),)),
    Rule(14, "SyncGroup", (_group(O.READ),)),
    Rule(15, "DescribeGroups", (_group(O.DESCRIBE, ENTRY, Source.GROUPS),)),
    Rule(16, "ListGroups", (
        Check("group", G, O.DESCRIBE, Source.LISTED_GROUP, None, FILTER, alternatives=(Grant(C, O.DESCRIBE),)),
    ), "Describe on the Cluster lists every group."),
    Rule(17, "SaslHandshake", ()),
    Rule(18, "ApiVersions", ()),
    Rule(19, "CreateTopics", (
        Check("topic", T, O.CREATE, Source.TOPIC, TOPIC_DENIED, ENTRY, alternatives=CREATE_ON_CLUSTER),
        Check("configs", T, O.DESCRIBE_CONFIGS, Source.TOPIC, TOPIC_DENIED, Scope.DETAILS, versions=(5, 7)),
    ), "v5+: without DescribeConfigs on the topic its configs, partition count and replication factor are "
       "withheld (topic_config_error_code), as Kafka's controller."),
    Rule(20, "DeleteTopics", (
        Check("describe", T, O.DESCRIBE, Source.TOPIC, TOPIC_DENIED, ENTRY, alternatives=DELETE_ON_CLUSTER),
        _topic(O.DELETE, when=frozenset({"existing"}), alternatives=DELETE_ON_CLUSTER),
    ), "Describe comes before existence (an unknown name is refused, not UNKNOWN_TOPIC_OR_PARTITION); "
       "a topic id whose topic the client may not Describe is refused with a null name."),
    Rule(21, "DeleteRecords", (_topic(O.DELETE),)),
    Rule(22, "InitProducerId", (
        _txn(when=frozenset({"transactional"})),
        _cluster("idempotent", O.IDEMPOTENT_WRITE, when=frozenset({""}),
                 alternatives=(Grant(T, O.WRITE, Source.ANY_TOPIC),)),
    ), "An idempotent producer needs IdempotentWrite on the Cluster or Write on some topic."),
    Rule(24, "AddPartitionsToTxn", (
        _cluster("cluster", O.CLUSTER_ACTION, versions=(4, 5)),
        _txn(versions=(0, 3)),
        _topic(O.WRITE, versions=(0, 3)),
    ), "v4+ comes from brokers: ClusterAction only. v0-3: a refused topic leaves the others OPERATION_NOT_ATTEMPTED."),
    Rule(25, "AddOffsetsToTxn", (_txn(), _group(O.READ))),
    Rule(26, "EndTxn", (_txn(),)),
    Rule(27, "WriteTxnMarkers", (_cluster("cluster", O.CLUSTER_ACTION, alternatives=(Grant(C, O.ALTER),)),),
         "Alter on the Cluster also allows (KIP-664: admins abort hanging transactions)."),
    Rule(28, "TxnOffsetCommit", (_txn(), _group(O.READ), _topic(O.READ))),
    Rule(29, "DescribeAcls", (_cluster("cluster", O.DESCRIBE),)),
    Rule(30, "CreateAcls", (_cluster("cluster", O.ALTER),)),
    Rule(31, "DeleteAcls", (_cluster("cluster", O.ALTER),)),
    Rule(32, "DescribeConfigs", (
        Check("topic", T, O.DESCRIBE_CONFIGS, Source.CONFIG_RESOURCE, TOPIC_DENIED, ENTRY, when=frozenset({"", "topic"})),
        _cluster("broker", O.DESCRIBE_CONFIGS, ENTRY, when=frozenset({"broker"})),
        _group(O.DESCRIBE_CONFIGS, ENTRY, Source.CONFIG_RESOURCE, when=frozenset({"group"})),
    )),
    Rule(33, "AlterConfigs", (
        Check("topic", T, O.ALTER_CONFIGS, Source.CONFIG_RESOURCE, TOPIC_DENIED, ENTRY, when=frozenset({"", "topic"})),
        _cluster("broker", O.ALTER_CONFIGS, ENTRY, when=frozenset({"broker"})),
        _group(O.ALTER_CONFIGS, ENTRY, Source.CONFIG_RESOURCE, when=frozenset({"group"})),
    )),
    Rule(35, "DescribeLogDirs", (
        Check("cluster_v0", C, O.DESCRIBE, Source.CLUSTER, None, FILTER, versions=(0, 2)),
        _cluster("cluster", O.DESCRIBE, versions=(3, 32767)),
    ), "v0-2 answer an empty result instead of an error."),
    Rule(36, "SaslAuthenticate", ()),
    Rule(37, "CreatePartitions", (_topic(O.ALTER),)),
    Rule(42, "DeleteGroups", (_group(O.DELETE, ENTRY, Source.GROUPS),)),
    Rule(44, "IncrementalAlterConfigs", (
        Check("topic", T, O.ALTER_CONFIGS, Source.CONFIG_RESOURCE, TOPIC_DENIED, ENTRY, when=frozenset({"", "topic"})),
        _cluster("broker", O.ALTER_CONFIGS, ENTRY, when=frozenset({"broker"})),
        _group(O.ALTER_CONFIGS, ENTRY, Source.CONFIG_RESOURCE, when=frozenset({"group"})),
    )),
    Rule(47, "OffsetDelete", (_group(O.DELETE), _topic(O.READ))),
    Rule(50, "DescribeUserScramCredentials", (_cluster("cluster", O.DESCRIBE),)),
    Rule(51, "AlterUserScramCredentials", (_cluster("cluster", O.ALTER, ENTRY),)),
    Rule(60, "DescribeCluster", (CLUSTER_OPERATIONS_SHOWN,),
         "No refusal; the cluster's authorized operations (when asked for) need Describe on the Cluster, else 0."),
    Rule(61, "DescribeProducers", (_topic(O.READ),)),
    Rule(65, "DescribeTransactions", (
        Check("transactional_id", X, O.DESCRIBE, Source.TRANSACTIONAL_IDS, TXN_DENIED, ENTRY),
        Check("topic", T, O.DESCRIBE, Source.TOPIC, None, FILTER),
    ), "A transaction's partitions on topics the client may not Describe are left out."),
    Rule(66, "ListTransactions", (
        Check("transactional_id", X, O.DESCRIBE, Source.LISTED_TRANSACTION, None, FILTER),
    )),
    Rule(68, "ConsumerGroupHeartbeat", (
        _group(O.READ),
        Check("topic", T, O.DESCRIBE, Source.TOPIC, TOPIC_DENIED, REQUEST),
        Check("regex", T, O.DESCRIBE, Source.TOPIC, None, FILTER, when=frozenset({"regex"})),
    ), "Subscribed topic names need Describe; a regex subscription only matches describable topics (the "
       "group coordinator filters them with the member's principal)."),
    Rule(69, "ConsumerGroupDescribe", (
        _group(O.DESCRIBE, ENTRY, Source.GROUPS),
        Check("topic", T, O.DESCRIBE, Source.TOPIC, TOPIC_DENIED, ENTRY),
    ), "A group whose members are assigned topics the client may not Describe is refused."),
    Rule(74, "ListConfigResources", (
        _cluster("cluster", O.DESCRIBE_CONFIGS),
    ), "Kafka 4.1 (KIP-1142): the whole answer is refused without DescribeConfigs on the Cluster."),
    Rule(75, "DescribeTopicPartitions", (
        _topic(O.DESCRIBE, when=frozenset({"", "named"})),
        Check("listed", T, O.DESCRIBE, Source.TOPIC, None, FILTER, when=frozenset({"all"})),
    )),
    Rule(76, "ShareGroupHeartbeat", (
        _group(O.READ),
        Check("topic", T, O.DESCRIBE, Source.TOPIC, TOPIC_DENIED, REQUEST),
    ), "KIP-932: subscribed topic names need Describe, as for ConsumerGroupHeartbeat (Kafka 4.2)."),
    Rule(77, "ShareGroupDescribe", (
        _group(O.DESCRIBE, ENTRY, Source.GROUPS),
        Check("topic", T, O.DESCRIBE, Source.TOPIC, TOPIC_DENIED, ENTRY),
    ), "A share group whose members are assigned topics the client may not Describe is refused (v1+, the "
       "only version served)."),
    Rule(78, "ShareFetch", (_group(O.READ), _topic(O.READ)),
         "A refused group answers the top-level error; a refused topic, each of its partitions."),
    Rule(79, "ShareAcknowledge", (_group(O.READ), _topic(O.READ, when=frozenset({""}))),
         "Acknowledgements need an open share session: the walk's \"session\" shape is the ShareFetch that "
         "opens it (only the group check applies to it)."),
    Rule(90, "DescribeShareGroupOffsets", (
        _group(O.DESCRIBE, ENTRY, Source.GROUPS),
        _topic(O.DESCRIBE, when=frozenset({"", "named"})),
        Check("listed", T, O.DESCRIBE, Source.TOPIC, None, FILTER, when=frozenset({"all"})),
    ), "Topics null (all of the group's): those the client may not Describe are left out."),
    Rule(91, "AlterShareGroupOffsets", (_group(O.READ), _topic(O.READ)),
         "A refused group is answered at the top and on every partition."),
    Rule(92, "DeleteShareGroupOffsets", (_group(O.DELETE), _topic(O.READ))),
)

# Envelope (58) is not advertised: it is served on the controller listener only (server/app.py).
ENVELOPE = Rule(58, "Envelope", (_cluster("cluster", O.CLUSTER_ACTION),))


def rule(api_key: int) -> Rule:
    """The row of a served API (KeyError for one without: every served API must have a row)."""
    return RULES[api_key]
