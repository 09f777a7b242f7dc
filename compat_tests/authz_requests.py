"""A minimal valid request for every served API and version, by request shape (data, no client library).

Used by test_authorization_table.py: each factory names only the resources of :class:`Names`, so
that the ACLs a principal holds decide the answer. A shape is the request variant a table check
names in ``when`` ("" is the plain form; e.g. "transaction" for FindCoordinator's key type 1).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rivven_kproto.codec.acls import Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    share_acknowledge,
    share_common,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    share_group_offsets,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from rivven_kproto.codec.records.records import Record, build_batch

TOPIC_CONFIG, BROKER_CONFIG, GROUP_CONFIG = 2, 4, 32
LATEST = -1


@dataclass(frozen=True)
class Names:
    """The resources one API's requests name (a principal's ACLs are on exactly these)."""

    topic: str
    group: str
    transactional_id: str
    missing_topic: str  # for destructive APIs: refused or UNKNOWN_TOPIC, never acted on
    topic_id: uuid.UUID = uuid.UUID(int=0)  # ``topic``'s id (the share APIs name topics by id)


def make(cls: Any, version: int, **fields: Any) -> Any:
    """``cls`` with the given fields that exist at ``version`` (the others keep their defaults)."""
    absent = {spec.name for spec in cls.kafka_fields() if not spec.present_in(version)}
    return cls(**{name: value for name, value in fields.items() if name not in absent})


def _records(transactional: bool = False) -> bytes:
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v", headers=[])
    if not transactional:
        return build_batch([record])
    return build_batch([record], producer_id=1_000_000, producer_epoch=0, base_sequence=0, is_transactional=True)


Shapes = list[tuple[str, Any]]
Factory = Callable[[int, Names], Shapes]


def _produce(v: int, n: Names) -> Shapes:
    """Plain records; a transactional batch with its transactional id; plain records naming one."""
    def request(transactional_id: str | None, transactional: bool) -> Any:
        data = [make(produce.TopicProduceData, v, name=n.topic, partition_data=[
            make(produce.PartitionProduceData, v, index=0, records=_records(transactional))])]
        return make(produce.ProduceRequest, v, transactional_id=transactional_id, acks=1, timeout_ms=10_000,
                    topic_data=data)
    shapes = [("", request(None, False))]
    if v >= 3:  # the transactional id field
        shapes += [("transactional", request(n.transactional_id, True)), ("plain_with_id", request(n.transactional_id, False))]
    return shapes


def _fetch(v: int, n: Names) -> Shapes:
    """A consumer's fetch, and a follower's (replica id 1)."""
    def request(replica_id: int) -> Any:
        part = make(fetch.FetchPartition, v, partition=0, fetch_offset=0, partition_max_bytes=1024)
        topics = [make(fetch.FetchTopic, v, topic=n.topic, partitions=[part])]
        return make(fetch.FetchRequest, v, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=4096,
                    topics=topics)
    return [("", request(-1)), ("follower", request(1))]


def _list_offsets(v: int, n: Names) -> Shapes:
    topics = [make(list_offsets.ListOffsetsTopic, v, name=n.topic,
                   partitions=[make(list_offsets.ListOffsetsPartition, v, partition_index=0, timestamp=LATEST)])]
    return [("", make(list_offsets.ListOffsetsRequest, v, replica_id=-1, topics=topics))]


def _metadata(v: int, n: Names) -> Shapes:
    def request(topics: Any) -> Any:
        return make(metadata.MetadataRequest, v, topics=topics, allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=True)
    shapes = [("named", request([make(metadata.MetadataRequestTopic, v, name=n.topic)]))]
    shapes.append(("all", request([] if v == 0 else None)))
    return shapes


def _offset_commit(v: int, n: Names) -> Shapes:
    part = make(offset_commit.OffsetCommitRequestPartition, v, partition_index=0, committed_offset=0,
                committed_metadata="")
    topics = [make(offset_commit.OffsetCommitRequestTopic, v, name=n.topic, partitions=[part])]
    return [("", make(offset_commit.OffsetCommitRequest, v, group_id=n.group, generation_id_or_member_epoch=-1,
                      member_id="", topics=topics))]


def _offset_fetch(v: int, n: Names) -> Shapes:
    if v >= 8:
        def request(topics: Any) -> Any:
            group = make(offset_fetch.OffsetFetchRequestGroup, v, group_id=n.group, topics=topics)
            return make(offset_fetch.OffsetFetchRequest, v, groups=[group])
        named = [make(offset_fetch.OffsetFetchRequestTopics, v, name=n.topic, partition_indexes=[0])]
        return [("named", request(named)), ("all", request(None))]
    named_old = [make(offset_fetch.OffsetFetchRequestTopic, v, name=n.topic, partition_indexes=[0])]
    shapes = [("named", make(offset_fetch.OffsetFetchRequest, v, group_id=n.group, topics=named_old))]
    if v >= 2:
        shapes.append(("all", make(offset_fetch.OffsetFetchRequest, v, group_id=n.group, topics=None)))
    return shapes


def _find_coordinator(v: int, n: Names) -> Shapes:
    def request(key_type: int, key: str) -> Any:
        return make(find_coordinator.FindCoordinatorRequest, v, key=key, key_type=key_type, coordinator_keys=[key])
    shapes = [("group", request(0, n.group))]
    if v >= 1:
        shapes.append(("transaction", request(1, n.transactional_id)))
    return shapes


def _join_group(v: int, n: Names) -> Shapes:
    protocol = make(join_group.JoinGroupRequestProtocol, v, name="range", metadata=b"")
    return [("", make(join_group.JoinGroupRequest, v, group_id=n.group, session_timeout_ms=10_000,
                      rebalance_timeout_ms=10_000, member_id="nobody", protocol_type="consumer", protocols=[protocol]))]


def _heartbeat(v: int, n: Names) -> Shapes:
    return [("", make(heartbeat.HeartbeatRequest, v, group_id=n.group, generation_id=1, member_id="nobody"))]


def _leave_group(v: int, n: Names) -> Shapes:
    members = [make(leave_group.MemberIdentity, v, member_id="nobody")]
    return [("", make(leave_group.LeaveGroupRequest, v, group_id=n.group, member_id="nobody", members=members))]


def _sync_group(v: int, n: Names) -> Shapes:
    return [("", make(sync_group.SyncGroupRequest, v, group_id=n.group, generation_id=1, member_id="nobody",
                      protocol_type="consumer", protocol_name="range", assignments=[]))]


def _describe_groups(v: int, n: Names) -> Shapes:
    return [("", make(describe_groups.DescribeGroupsRequest, v, groups=[n.group]))]


def _list_groups(v: int, n: Names) -> Shapes:
    return [("", make(list_groups.ListGroupsRequest, v))]


def _create_topics(v: int, n: Names) -> Shapes:
    topic = make(create_topics.CreatableTopic, v, name=n.missing_topic, num_partitions=1, replication_factor=1,
                 assignments=[], configs=[])
    return [("", make(create_topics.CreateTopicsRequest, v, topics=[topic], timeout_ms=10_000, validate_only=True))]


def _delete_topics(v: int, n: Names) -> Shapes:
    """A name that does not exist, and (once per caller) the topic ``n.topic``, deleted if allowed."""
    def request(name: str) -> Any:
        state = make(delete_topics.DeleteTopicState, v, name=name, topic_id=uuid.UUID(int=0))
        return make(delete_topics.DeleteTopicsRequest, v, topics=[state], topic_names=[name], timeout_ms=10_000)
    return [("", request(n.missing_topic)), ("existing", request(n.topic))]


def _delete_records(v: int, n: Names) -> Shapes:
    part = make(delete_records.DeleteRecordsPartition, v, partition_index=0, offset=0)
    topics = [make(delete_records.DeleteRecordsTopic, v, name=n.topic, partitions=[part])]
    return [("", make(delete_records.DeleteRecordsRequest, v, topics=topics, timeout_ms=10_000))]


def _init_producer_id(v: int, n: Names) -> Shapes:
    def request(transactional_id: str | None) -> Any:
        return make(init_producer_id.InitProducerIdRequest, v, transactional_id=transactional_id,
                    transaction_timeout_ms=60_000)
    return [("", request(None)), ("transactional", request(n.transactional_id))]


def _add_partitions_to_txn(v: int, n: Names) -> Shapes:
    topics = [make(add_partitions_to_txn.AddPartitionsToTxnTopic, v, name=n.topic, partitions=[0])]
    txn = make(add_partitions_to_txn.AddPartitionsToTxnTransaction, v, transactional_id=n.transactional_id,
               producer_id=1_000_000, producer_epoch=0, verify_only=True, topics=topics)
    return [("", make(add_partitions_to_txn.AddPartitionsToTxnRequest, v, transactions=[txn],
                      v3_and_below_transactional_id=n.transactional_id, v3_and_below_producer_id=1_000_000,
                      v3_and_below_producer_epoch=0, v3_and_below_topics=topics))]


def _add_offsets_to_txn(v: int, n: Names) -> Shapes:
    return [("", make(add_offsets_to_txn.AddOffsetsToTxnRequest, v, transactional_id=n.transactional_id,
                      producer_id=1_000_000, producer_epoch=0, group_id=n.group))]


def _end_txn(v: int, n: Names) -> Shapes:
    return [("", make(end_txn.EndTxnRequest, v, transactional_id=n.transactional_id, producer_id=1_000_000,
                      producer_epoch=0, committed=False))]


def _write_txn_markers(v: int, n: Names) -> Shapes:
    topics = [make(write_txn_markers.WritableTxnMarkerTopic, v, name=n.missing_topic, partition_indexes=[0])]
    marker = make(write_txn_markers.WritableTxnMarker, v, producer_id=1_000_000, producer_epoch=0,
                  transaction_result=False, topics=topics, coordinator_epoch=0)
    return [("", make(write_txn_markers.WriteTxnMarkersRequest, v, markers=[marker]))]


def _txn_offset_commit(v: int, n: Names) -> Shapes:
    part = make(txn_offset_commit.TxnOffsetCommitRequestPartition, v, partition_index=0, committed_offset=0,
                committed_metadata="")
    topics = [make(txn_offset_commit.TxnOffsetCommitRequestTopic, v, name=n.topic, partitions=[part])]
    return [("", make(txn_offset_commit.TxnOffsetCommitRequest, v, transactional_id=n.transactional_id,
                      group_id=n.group, producer_id=1_000_000, producer_epoch=0, topics=topics))]


def _acl_fields(n: Names) -> dict[str, Any]:
    return {"principal": "User:nobody", "host": "*", "operation": Operation.READ, "permission_type": Permission.ALLOW}


def _describe_acls(v: int, n: Names) -> Shapes:
    return [("", make(describe_acls.DescribeAclsRequest, v, resource_type_filter=ResourceType.TOPIC,
                      resource_name_filter=n.missing_topic, pattern_type_filter=PatternType.LITERAL,
                      principal_filter=None, host_filter=None, operation=Operation.ANY,
                      permission_type=Permission.ANY))]


def _create_acls(v: int, n: Names) -> Shapes:
    creation = make(create_acls.AclCreation, v, resource_type=ResourceType.TOPIC, resource_name=n.missing_topic,
                    resource_pattern_type=PatternType.LITERAL, **_acl_fields(n))
    return [("", make(create_acls.CreateAclsRequest, v, creations=[creation]))]


def _delete_acls(v: int, n: Names) -> Shapes:
    fields = _acl_fields(n)
    flt = make(delete_acls.DeleteAclsFilter, v, resource_type_filter=ResourceType.TOPIC,
               resource_name_filter=n.missing_topic, pattern_type_filter=PatternType.LITERAL,
               principal_filter=fields["principal"], host_filter="*", operation=Operation.READ,
               permission_type=Permission.ALLOW)
    return [("", make(delete_acls.DeleteAclsRequest, v, filters=[flt]))]


def _describe_configs(v: int, n: Names) -> Shapes:
    def request(resource_type: int, name: str) -> Any:
        resource = make(describe_configs.DescribeConfigsResource, v, resource_type=resource_type,
                        resource_name=name, configuration_keys=None)
        return make(describe_configs.DescribeConfigsRequest, v, resources=[resource])
    return [("topic", request(TOPIC_CONFIG, n.topic)), ("broker", request(BROKER_CONFIG, "1")),
            ("group", request(GROUP_CONFIG, n.group))]


def _alter_configs(v: int, n: Names) -> Shapes:
    def request(resource_type: int, name: str) -> Any:
        resource = make(alter_configs.AlterConfigsResource, v, resource_type=resource_type, resource_name=name,
                        configs=[])
        return make(alter_configs.AlterConfigsRequest, v, resources=[resource], validate_only=True)
    return [("topic", request(TOPIC_CONFIG, n.topic)), ("broker", request(BROKER_CONFIG, "1")),
            ("group", request(GROUP_CONFIG, n.group))]


def _incremental_alter_configs(v: int, n: Names) -> Shapes:
    def request(resource_type: int, name: str) -> Any:
        resource = make(incremental_alter_configs.AlterConfigsResource, v, resource_type=resource_type,
                        resource_name=name, configs=[])
        return make(incremental_alter_configs.IncrementalAlterConfigsRequest, v, resources=[resource],
                    validate_only=True)
    return [("topic", request(TOPIC_CONFIG, n.topic)), ("broker", request(BROKER_CONFIG, "1")),
            ("group", request(GROUP_CONFIG, n.group))]


def _describe_log_dirs(v: int, n: Names) -> Shapes:
    return [("", make(describe_log_dirs.DescribeLogDirsRequest, v, topics=None))]


def _create_partitions(v: int, n: Names) -> Shapes:
    topic = make(create_partitions.CreatePartitionsTopic, v, name=n.topic, count=2, assignments=None)
    return [("", make(create_partitions.CreatePartitionsRequest, v, topics=[topic], timeout_ms=10_000,
                      validate_only=True))]


def _delete_groups(v: int, n: Names) -> Shapes:
    return [("", make(delete_groups.DeleteGroupsRequest, v, groups_names=[n.group]))]


def _offset_delete(v: int, n: Names) -> Shapes:
    topics = [make(offset_delete.OffsetDeleteRequestTopic, v, name=n.topic,
                   partitions=[make(offset_delete.OffsetDeleteRequestPartition, v, partition_index=0)])]
    return [("", make(offset_delete.OffsetDeleteRequest, v, group_id=n.group, topics=topics))]


def _describe_scram(v: int, n: Names) -> Shapes:
    return [("", make(describe_user_scram_credentials.DescribeUserScramCredentialsRequest, v, users=None))]


def _alter_scram(v: int, n: Names) -> Shapes:
    deletion = make(alter_user_scram_credentials.ScramCredentialDeletion, v, name="nobody", mechanism=1)
    return [("", make(alter_user_scram_credentials.AlterUserScramCredentialsRequest, v, deletions=[deletion],
                      upsertions=[]))]


def _describe_cluster(v: int, n: Names) -> Shapes:
    return [("", make(describe_cluster.DescribeClusterRequest, v, include_cluster_authorized_operations=True))]


def _describe_producers(v: int, n: Names) -> Shapes:
    topics = [make(describe_producers.TopicRequest, v, name=n.topic, partition_indexes=[0])]
    return [("", make(describe_producers.DescribeProducersRequest, v, topics=topics))]


def _describe_transactions(v: int, n: Names) -> Shapes:
    return [("", make(describe_transactions.DescribeTransactionsRequest, v, transactional_ids=[n.transactional_id]))]


def _list_transactions(v: int, n: Names) -> Shapes:
    return [("", make(list_transactions.ListTransactionsRequest, v, state_filters=[], producer_id_filters=[]))]


def _consumer_group_heartbeat(v: int, n: Names) -> Shapes:
    return [("", make(consumer_group_heartbeat.ConsumerGroupHeartbeatRequest, v, group_id=n.group,
                      member_id=str(uuid.uuid4()) if v >= 1 else "", member_epoch=0, rebalance_timeout_ms=10_000,
                      subscribed_topic_names=[n.topic], topic_partitions=[]))]


def _consumer_group_describe(v: int, n: Names) -> Shapes:
    return [("", make(consumer_group_describe.ConsumerGroupDescribeRequest, v, group_ids=[n.group]))]


def _describe_topic_partitions(v: int, n: Names) -> Shapes:
    named = [make(describe_topic_partitions.TopicRequest, v, name=n.topic)]
    return [("named", make(describe_topic_partitions.DescribeTopicPartitionsRequest, v, topics=named)),
            ("all", make(describe_topic_partitions.DescribeTopicPartitionsRequest, v, topics=[]))]


def _list_config_resources(v: int, n: Names) -> Shapes:
    return [("", make(list_config_resources.ListConfigResourcesRequest, v, resource_types=[2] if v >= 1 else []))]


def _share_group_heartbeat(v: int, n: Names) -> Shapes:
    return [("", make(share_group_heartbeat.ShareGroupHeartbeatRequest, v, group_id=n.group,
                      member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None, subscribed_topic_names=[n.topic]))]


def _share_group_describe(v: int, n: Names) -> Shapes:
    return [("", make(share_group_describe.ShareGroupDescribeRequest, v, group_ids=[n.group],
                      include_authorized_operations=False))]


def _share_fetch_request(v: int, n: Names, member_id: str, topics: list[Any]) -> Any:
    return make(share_fetch.ShareFetchRequest, v, group_id=n.group, member_id=member_id, share_session_epoch=0,
                max_wait_ms=0, min_bytes=0, max_bytes=4096, max_records=10, batch_size=10, topics=topics,
                forgotten_topics_data=[])


def _share_fetch(v: int, n: Names) -> Shapes:
    """A new member's first ShareFetch (opens its share session) of the topic's partition 0."""
    topics = [make(share_fetch.ShareFetchTopic, v, topic_id=n.topic_id, partitions=[
        make(share_fetch.ShareFetchPartition, v, partition_index=0, acknowledgement_batches=[])])]
    return [("", _share_fetch_request(v, n, str(uuid.uuid4()), topics))]


def _share_acknowledge(v: int, n: Names) -> Shapes:
    """Acknowledgements need an open share session: a ShareFetch of no partition opens it ("session"),
    then offset 0 of the topic is acknowledged at the session's next epoch."""
    member_id = str(uuid.uuid4())
    batch = make(share_common.AcknowledgementBatch, v, first_offset=0, last_offset=0, acknowledge_types=[1])
    topics = [make(share_acknowledge.AcknowledgeTopic, v, topic_id=n.topic_id, partitions=[
        make(share_acknowledge.AcknowledgePartition, v, partition_index=0, acknowledgement_batches=[batch])])]
    return [("session", _share_fetch_request(v, n, member_id, [])),
            ("", make(share_acknowledge.ShareAcknowledgeRequest, v, group_id=n.group, member_id=member_id,
                      share_session_epoch=1, topics=topics))]


def _describe_share_group_offsets(v: int, n: Names) -> Shapes:
    def request(topics: Any) -> Any:
        group = make(share_group_offsets.DescribeShareOffsetsRequestGroup, v, group_id=n.group, topics=topics)
        return make(share_group_offsets.DescribeShareGroupOffsetsRequest, v, groups=[group])
    named = [make(share_group_offsets.DescribeShareOffsetsRequestTopic, v, topic_name=n.topic, partitions=[0])]
    return [("named", request(named)), ("all", request(None))]


def _alter_share_group_offsets(v: int, n: Names) -> Shapes:
    part = make(share_group_offsets.AlterShareOffsetsRequestPartition, v, partition_index=0, start_offset=0)
    topics = [make(share_group_offsets.AlterShareOffsetsRequestTopic, v, topic_name=n.topic, partitions=[part])]
    return [("", make(share_group_offsets.AlterShareGroupOffsetsRequest, v, group_id=n.group, topics=topics))]


def _delete_share_group_offsets(v: int, n: Names) -> Shapes:
    topics = [make(share_group_offsets.DeleteShareOffsetsRequestTopic, v, topic_name=n.topic)]
    return [("", make(share_group_offsets.DeleteShareGroupOffsetsRequest, v, group_id=n.group, topics=topics))]


def _api_versions(v: int, n: Names) -> Shapes:
    return [("", make(api_versions.ApiVersionsRequest, v, client_software_name="authz",
                      client_software_version="1"))]


FACTORIES: dict[int, Factory] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit, 9: _offset_fetch,
    10: _find_coordinator, 11: _join_group, 12: _heartbeat, 13: _leave_group, 14: _sync_group,
    15: _describe_groups, 16: _list_groups, 18: _api_versions, 19: _create_topics, 20: _delete_topics,
    21: _delete_records, 22: _init_producer_id, 24: _add_partitions_to_txn, 25: _add_offsets_to_txn, 26: _end_txn,
    27: _write_txn_markers, 28: _txn_offset_commit, 29: _describe_acls, 30: _create_acls, 31: _delete_acls,
    32: _describe_configs, 33: _alter_configs, 35: _describe_log_dirs, 37: _create_partitions,
    42: _delete_groups, 44: _incremental_alter_configs, 47: _offset_delete, 50: _describe_scram,
    51: _alter_scram, 60: _describe_cluster, 61: _describe_producers, 65: _describe_transactions,
    66: _list_transactions, 68: _consumer_group_heartbeat, 69: _consumer_group_describe,
    74: _list_config_resources, 75: _describe_topic_partitions, 76: _share_group_heartbeat,
    77: _share_group_describe, 78: _share_fetch, 79: _share_acknowledge, 90: _describe_share_group_offsets,
    91: _alter_share_group_offsets, 92: _delete_share_group_offsets,
}
# SaslHandshake (17) and SaslAuthenticate (36) are the login itself: the test walks their
# versions by logging in, not through a factory.
LOGIN_APIS = frozenset({17, 36})
