"""The broker's engine room: topics, their partition logs and topic configs, in plain Python.

Everything here is synchronous and deterministic (time is an argument); the server layer decides
when to wait, when to fsync and on which thread. State changes do their file writes into the page
cache only; fsyncs and other blocking file work are collected (``unflushed``, the coordinators'
logs, ``work``) for the server's flusher to run on a worker thread (see ``broker/durable``).
Layout of the data directory::

    <data_dir>/meta/cluster.json      {"cluster_id": ..., "node_id": ...}, written once
    <data_dir>/meta/topics.json       see broker.topics
    <data_dir>/meta/scram.json        SCRAM credentials (salted, hashed), see broker.security.scram
    <data_dir>/meta/acls.json         ACLs, see broker.security.acls
    <data_dir>/<topic>-<partition>/   one native Partition each (see broker.log)
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rivven_kproto.codec.errors import Errors, KafkaError

from . import config_descriptions, group_configs
from .claims import ClaimsLease
from .cluster import ClusterView, Node, shard_of
from .config import BrokerConfig
from .coordinator_shards import CoordinatorShard, log_names
from .datadir_lock import DataDirLock
from .descriptors import check_room_for_partitions
from .durable.work import BlockingWork, run_all
from .dynamic_configs import FILE_NAME as DYNAMIC_CONFIGS_FILE
from .dynamic_configs import DynamicBrokerConfigs
from .file_modes import make_private_dir, warn_if_loose
from .groups import GroupCoordinator
from .log.config import LogConfig
from .log.partition import Partition
from .markers.writer import MarkerWriter
from .membership import Pulse
from .producer_ids import ProducerIdAllocator
from .security.acls import FILE_NAME as ACLS_FILE
from .security.acls import Authorizer
from .security.authorization_rules import rule
from .security.scram import FILE_NAME as SCRAM_FILE
from .security.scram import ScramStore
from .share.wiring import make_leader_shares, make_share_coordinator, share_served
from .storage import is_native, open_storage
from .topics import (
    ConfigEntry,
    TopicMeta,
    TopicStore,
    collision_key,
    validate_topic_config_values,
    validate_topic_name,
)
from .txn.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)
REGEX_MATCH = rule(68).check("regex")  # ConsumerGroupHeartbeat: the topics a member's regex may match

MAX_PARTITIONS = 10_000
CLOSE_THREADS = 8  # partitions closed at once at shutdown (each fsyncs its files)
# Documents the controller writes and the other brokers of a shared store re-read when they change.
FOLLOWED_DOCUMENTS = (ACLS_FILE, SCRAM_FILE, DYNAMIC_CONFIGS_FILE, group_configs.FILE_NAME)


@dataclass
class Topic:
    meta: TopicMeta
    log_config: LogConfig
    # By index; None where another broker leads the partition (a store shared by several brokers).
    partitions: list[Partition | None] = field(default_factory=list)

    def led(self) -> list[Partition]:
        return [p for p in self.partitions if p is not None]

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def compression_type(self) -> str:
        return self.meta.configs.get("compression.type", "producer").strip()  # Kafka trims values


class Broker:
    """All topics of one node; the single owner of every Partition."""

    def __init__(self, config: BrokerConfig, now_ms: int) -> None:
        self.config = config
        self.data_dir = config.data_dir
        # A database store keeps everything (partitions, metadata, credentials) in the database and
        # coordinates its brokers there: no local directory, so brokers started from one directory
        # do not meet on ./kproto-data's lock. The native log lives in, and locks, the directory
        # (private: it holds the SCRAM credentials and ACLs).
        self.lock: DataDirLock | None = None
        if is_native(config.storage):
            make_private_dir(self.data_dir)
            warn_if_loose(self.data_dir)
            self.lock = DataDirLock(self.data_dir)
            self.lock.acquire()
        else:
            log.info("the database store keeps no local data directory (%s is neither created nor locked)",
                     self.data_dir)
        try:
            self._open(config, now_ms)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise

    def _open(self, config: BrokerConfig, now_ms: int) -> None:
        self.work = BlockingWork(inline=True)  # until a server's flusher takes the file work over
        self.unflushed: set[Partition] = set()  # written by the broker itself (markers) since the last flush
        # Partitions, coordinator logs and documents; apart, who this broker is in the cluster.
        self.storage, self.membership = open_storage(
            config.storage, self.data_dir, standby=config.storage_standby, node=(config.node_id, *config.advertised),
            assign_node_id=config.assign_node_id, start_wait_s=config.storage_start_wait_ms / 1000)
        if self.membership.assigned_node_id is not None:  # no --node-id: the shared store gave one
            config = self.config = dataclasses.replace(config, node_id=self.membership.assigned_node_id)
            log.info("serving as node %d (assigned by the %s store)", config.node_id, self.storage.kind)
        try:
            self._load(config, now_ms)
        except BaseException:
            self.membership.close()
            self.storage.close()
            raise

    def _load(self, config: BrokerConfig, now_ms: int) -> None:
        storage = self.storage
        self.cluster_id = storage.cluster_id(config.node_id)
        # Which partitions this broker leads and whether it coordinates (alone: all, and yes).
        self.cluster = ClusterView.alone(config.node_id, *config.advertised)
        # What this broker leads and coordinates holds while its heartbeat is fresh (see claims):
        # the first heartbeat confirms it from the time it started.
        membership = self.membership
        self.claims = ClaimsLease(membership.session_timeout_s, membership.heartbeat_interval_s)
        # Partitions a client fetched past the end of: the next heartbeat checks their claims in the
        # store (another broker may have taken one and written past this log's end).
        self.doubted: set[tuple[str, int]] = set()
        pulse = membership.heartbeat(*config.advertised)
        if pulse is not None:
            self.cluster = self.view_of(pulse)
        self.store = TopicStore(storage.document("topics.json"), self.work)
        self.producer_ids = ProducerIdAllocator(storage.producer_id_blocks(), work=self.work)
        self.scram = ScramStore(storage.document(SCRAM_FILE), self.work)
        self.dynamic = DynamicBrokerConfigs(storage.document(DYNAMIC_CONFIGS_FILE), self.work)
        self.log_defaults = self._dynamic_log_defaults()
        self.group_configs = group_configs.open_group_configs(storage, self.work, config)
        self.authorizer = Authorizer(storage.document(ACLS_FILE), config.super_users,
                                     config.allow_everyone_if_no_acl_found, self.work) if config.authorizer_enabled else None
        self.catalog_seen = pulse.catalog if pulse is not None else None
        # The digests of the followed documents as loaded above (the pulse was read before them:
        # a change in between is seen as one at the next heartbeat, and read again).
        self.documents_seen = {name: pulse.documents.get(name) for name in FOLLOWED_DOCUMENTS} if pulse else {}
        self.topics: dict[str, Topic] = {}
        for meta in self.store.topics.values():
            topic = Topic(meta, self.log_config_of(meta.configs))
            for index in range(meta.partitions):
                led = self.cluster.leads(meta.topic_id, index, meta.assigned(index))
                topic.partitions.append(
                    self.open_partition(meta, index, topic.log_config, now_ms, new=False) if led else None)
            self.topics[meta.name] = topic
        # The coordinator shards this broker serves (see coordinator_shards), loaded from the
        # store; alone (the native log): the one shard, always.
        self.shard_count = storage.coordinator_shards
        self.shards: dict[int, CoordinatorShard] = {}
        self.markers = MarkerWriter(self.topics, self.shards, self.shard_of, self.unflushed)
        self._dropped_appends = 0  # coordinator log entries of shards handed over (``coordinator_writes``)
        self.shards_dropped = 0  # coordinator shards handed over or lost so far (parked group requests re-check)
        self.wake_group = lambda group_id: None  # wakes a group's parked requests (the server sets it)
        for shard in self.cluster.shards_of(config.node_id):
            self.load_shard(shard, now_ms)
        self.leader_shares = make_leader_shares(self.group_configs.share, config.share, config.storage, self.partition,
                                                lambda partition: storage.share_state_log(partition, self.work))

    def _may_describe_topic(self, principal: str, client_host: str, topic: str) -> bool:
        """Whether a KIP-848 member's regex may match ``topic`` (the table's ConsumerGroupHeartbeat
        "regex" check, made for the member's principal)."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(
            principal, client_host.lstrip("/"), REGEX_MATCH.operation, REGEX_MATCH.resource_type, topic)

    def _make_shard(self, shard: int) -> CoordinatorShard:
        """A shard's group and transaction coordinators, empty until loaded."""
        config, storage = self.config, self.storage
        groups_log, txn_log = log_names(shard, self.shard_count)
        groups = GroupCoordinator(None, config.groups, work=self.work,
                                  durable_log=storage.coordinator_log(groups_log, self.work, shard))
        groups.topic_view = lambda: {name: len(t.partitions) for name, t in self.topics.items()}
        groups.wake = lambda group_id: self.wake_group(group_id)
        groups.consumer.timeouts_of = self.group_configs.consumer_timeouts
        if self.authorizer is not None:
            groups.topic_describable = self._may_describe_topic
        txn = TransactionCoordinator(
            storage.coordinator_log(txn_log, self.work, shard),
            self.producer_ids.allocate,
            self.markers.write_markers,
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
        )
        # Transactional offsets become visible (or are dropped) with their transaction; the groups
        # are loaded first so that recovery can finish transactions that hold offsets.
        txn.complete_groups = self.markers.complete_groups
        share = make_share_coordinator(
            config.share, lambda name: storage.coordinator_log(name, self.work, shard), shard, self.shard_count,
            groups.topic_view, lambda gid: gid in groups.groups or gid in groups.consumer_groups,
            self.group_configs.share) if self.share_enabled else None
        return CoordinatorShard(shard, groups, txn, share)

    @property
    def share_enabled(self) -> bool:
        return share_served(self.config.share)

    def read_shard(self, shard: int) -> CoordinatorShard:
        """Worker thread: a shard this broker took over, its logs read from the store (then
        ``load_shard`` replays them on the loop without waiting for the database)."""
        made = self._make_shard(shard)
        made.preload()
        return made

    def load_shard(self, shard: int, now_ms: int, read: CoordinatorShard | None = None) -> CoordinatorShard:
        """This broker holds the shard's lock (at start, or it took the shard over): load its
        groups and transactions from the store (or from ``read``, see ``read_shard``) and finish
        the transactions whose decision was logged."""
        loaded = read or self._make_shard(shard)
        loaded.groups.load(now_ms)
        if loaded.share is not None:
            loaded.share.load(now_ms)
        self.shards[shard] = loaded  # before recovery: it may complete offsets of its own groups
        try:
            loaded.txn.recover(now_ms, lambda: self._flush_unflushed(now_ms))
        except BaseException:
            del self.shards[shard]
            raise
        if self.shard_count > 1:
            log.info("node %d coordinates shard %d: %d groups, %d transactional ids loaded", self.config.node_id,
                     shard, len(loaded.groups.groups), len(loaded.txn.txns))
        return loaded

    def drop_shard(self, shard: int) -> CoordinatorShard | None:
        """Stop serving a shard (handed over): its state goes; the caller commits its logs' last
        entries (``CoordinatorShard.close``, off the loop) before releasing its lock."""
        dropped = self.shards.pop(shard, None)
        if dropped is not None:
            self.shards_dropped += 1
            self._dropped_appends += dropped.appended
            # Its transactions' markers are the next holder's now; an acknowledgement left here
            # would count for a later transaction of the producer should the shard come back.
            self.markers.remote.forget(dropped.txn.by_producer.keys())
            log.info("node %d no longer coordinates shard %d", self.config.node_id, shard)
        return dropped

    @property
    def coordinating(self) -> bool:
        """This broker serves at least one coordinator shard."""
        return bool(self.shards)

    def shard_of(self, key: str) -> int:
        return shard_of(key, self.shard_count)

    def group_coordinator(self, group_id: str) -> GroupCoordinator | None:
        """The coordinator of this group here (None: another broker's shard, or nobody's now, or
        this broker's claims may have lapsed)."""
        shard = self.shards.get(self.shard_of(group_id)) if self.claims.valid else None
        return shard.groups if shard is not None else None

    def txn_coordinator(self, transactional_id: str) -> TransactionCoordinator | None:
        shard = self.shards.get(self.shard_of(transactional_id)) if self.claims.valid else None
        return shard.txn if shard is not None else None

    def coordinates(self, key: str) -> bool:
        """This broker answers for the key's shard now (not while its claims may have lapsed)."""
        return self.claims.valid and self.shard_of(key) in self.shards

    @property
    def groups(self) -> GroupCoordinator:
        """The first shard's group coordinator: the only one on the native log (and a database
        of the single-coordinator version); with several shards, use ``group_coordinator``."""
        return self.shards[0].groups

    @property
    def txn(self) -> TransactionCoordinator:
        return self.shards[0].txn

    def group_coordinators(self) -> list[GroupCoordinator]:
        return [shard.groups for shard in self.shards.values()]

    def txn_coordinators(self) -> list[TransactionCoordinator]:
        return [shard.txn for shard in self.shards.values()]

    def producer_coordinator(self, producer_id: int) -> TransactionCoordinator | None:
        """The transaction coordinator here that knows this producer id (None: no shard held here does)."""
        return next((txn for txn in self.txn_coordinators() if producer_id in txn.by_producer), None)

    def view_of(self, pulse: Pulse) -> ClusterView:
        """The cluster as a heartbeat's pulse shows it (this broker in it, even before it is seen)."""
        nodes = pulse.nodes
        if all(node.node_id != self.config.node_id for node in nodes):  # not seen yet: it is alive
            nodes = (*nodes, Node(self.config.node_id, *self.config.advertised))
        return ClusterView(self.config.node_id, tuple(sorted(nodes, key=lambda n: n.node_id)), pulse.coordinator_id,
                           self.storage.coordinator_shards, dict(pulse.shard_owners), pulse.departed)

    # -- the cluster (several brokers on one store; following it: see follow.py) ---------------

    def led_logs(self) -> list[Partition]:
        """The logs of every partition this broker leads (as far as it knows)."""
        return [partition for topic in self.topics.values() for partition in topic.led()]

    def _flush_unflushed(self, now_ms: int) -> None:
        """At load only (nothing is served yet): make the markers recovery wrote durable."""
        for partition in self.unflushed:
            partition.flush(now_ms)
        self.unflushed.clear()

    def open_partition(
        self, meta: TopicMeta, index: int, log_config: LogConfig, now_ms: int, *, new: bool = True
    ) -> Partition:
        """Open (and, on a shared store, claim) a partition's log from the engine."""
        return self.storage.open_partition(meta.topic_id, meta.name, index, log_config, now_ms, self.work, new=new)

    def _open_new_partitions(self, topic: Topic, count: int, now_ms: int) -> None:
        """Open the partitions up to ``count`` that this broker leads (the others are opened by
        their leaders when they see the catalog), all or none: when one fails (the disk, the
        open-files limit), those just opened are deleted again and the request gets the error."""
        first = len(topic.partitions)
        try:
            for index in range(first, count):
                led = self.cluster.leads(topic.meta.topic_id, index, topic.meta.assigned(index))
                topic.partitions.append(self.open_partition(topic.meta, index, topic.log_config, now_ms) if led else None)
        except OSError as exc:
            opened = topic.partitions[first:]
            del topic.partitions[first:]
            for partition in opened:
                if partition is not None:
                    partition.delete()
            try:
                self.storage.discard_partition(topic.meta.topic_id, topic.name, first + len(opened))
            except OSError:
                log.exception("could not discard the partition of %s that failed to open", topic.name)
            log.error("creating partitions %d-%d of %s failed: %s", first, count - 1, topic.name, exc)
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                             f"Creating partitions of {topic.name} failed ({exc.strerror or exc}); none were created.") from None

    def log_config_of(self, overrides: dict[str, str]) -> LogConfig:
        """A topic's log settings: its overrides over the broker's log defaults in force."""
        return LogConfig.from_topic_config(overrides, self.log_defaults)

    def _dynamic_log_defaults(self) -> LogConfig:
        """The static log settings with the dynamic broker configs in force on this node over them."""
        return LogConfig.from_topic_config(self.dynamic.effective(self.config.node_id), self.config.log)

    def set_broker_configs(self, name: str, values: dict[str, str], *, validate_only: bool = False) -> None:
        """AlterConfigs on a broker resource ("" the cluster default, else this node's id): the
        level's values become ``values``; topics without their own override follow at once (and,
        on a shared store, the other brokers at their next heartbeat: the controller writes them)."""
        self.check_controller()
        if validate_only:
            self.dynamic.check(values, self.config.log, name)
            return
        self.dynamic.replace(name, values, self.config.log)
        self.apply_log_defaults()
        log.info("dynamic broker configs of %s now %s", name or "the cluster default", values)

    def apply_log_defaults(self) -> None:
        """The dynamic broker configs changed: topics without their own override follow at once."""
        self.log_defaults = self._dynamic_log_defaults()
        for topic in self.topics.values():
            topic.log_config = self.log_config_of(topic.meta.configs)
            for partition in topic.led():
                partition.config = topic.log_config

    # -- topics -------------------------------------------------------------------------------

    def topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
        return topic

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        """The topic with this id (Kafka's UUID, kept in the topic table), if any."""
        for topic in self.topics.values():
            if topic.meta.topic_id == topic_id:
                return topic
        return None

    def check_partition_exists(self, name: str, index: int) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION unless the catalog has it (led here or by another broker)."""
        if not 0 <= index < len(self.topic(name).partitions):
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {name}-{index}")

    def partition(self, name: str, index: int) -> Partition:
        """The log of a partition this broker leads (NOT_LEADER_OR_FOLLOWER for another's, and
        for every partition while this broker's claims may have lapsed: see claims)."""
        self.check_partition_exists(name, index)
        partition = self.topics[name].partitions[index]
        if partition is None or partition.fenced or not self.claims.valid:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"node {self.config.node_id} does not lead {name}-{index}")
        return partition

    def check_controller(self) -> None:
        """Topic catalog changes are made by the coordinating broker only (Kafka's controller)."""
        if not self.cluster.is_coordinator:
            raise KafkaError(Errors.NOT_CONTROLLER, f"node {self.config.node_id} is not the controller")

    def validate_topic_configs(self, configs: dict[str, str]) -> LogConfig:
        """Kafka's topic-config validation (names, types, ranges; INVALID_CONFIG), then the log's."""
        validate_topic_config_values(configs)
        return self.log_config_of(configs)

    def check_new_topic_name(self, name: str) -> None:
        """CreateTopics' name checks in Kafka's order: legal, not taken, no '.'/'_' collision."""
        if name in self.topics:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        validate_topic_name(name)
        key = collision_key(name)
        for existing in self.topics:
            if collision_key(existing) == key:
                raise KafkaError(
                    Errors.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {existing}"
                )

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        now_ms: int,
        *,
        validate_only: bool = False,
        assignments: list[list[int]] | None = None,
    ) -> Topic | None:
        """CreateTopics semantics: -1 means the broker default for partitions / replication;
        ``assignments`` (checked by the caller against the live brokers): each partition's replicas.

        Checks run in Kafka's (KRaft controller's) order, with its error codes and messages:
        name, existence, configs, replication factor, partition count.
        """
        self.check_controller()
        self.check_new_topic_name(name)
        log_config = self.validate_topic_configs(configs)
        if replication_factor < -1 or replication_factor == 0:
            raise KafkaError(
                Errors.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if num_partitions < -1 or num_partitions == 0:
            raise KafkaError(
                Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        partitions = self.config.num_partitions if num_partitions == -1 else num_partitions
        replicas = self.config.default_replication_factor if replication_factor == -1 else replication_factor
        live = len(self.cluster.nodes)
        if replicas > live:
            raise KafkaError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replicas} time(s): The target replication factor of "
                f"{replicas} cannot be reached because only {live} broker(s) are registered.",
            )
        if partitions > MAX_PARTITIONS:
            raise KafkaError(
                Errors.INVALID_PARTITIONS, f"Number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS}."
            )
        check_room_for_partitions(partitions, self.storage.descriptors_per_partition)
        if validate_only:
            return None
        meta = TopicMeta(name, uuid.uuid4(), partitions, dict(configs), replicas, list(assignments or []))
        topic = Topic(meta, log_config)
        self._open_new_partitions(topic, partitions, now_ms)
        self.topics[name] = topic
        self.store.topics[name] = meta
        self.store.save()
        log.info("created topic %s with %d partitions", name, partitions)
        for groups in self.group_coordinators():
            groups.topics_changed()  # KIP-848 regex subscriptions may now match it
        return topic

    def delete_topic(self, name: str) -> None:
        self.check_controller()
        topic = self.topic(name)
        del self.topics[name]
        del self.store.topics[name]
        self.store.save()
        for index, partition in enumerate(topic.partitions):
            if partition is None:  # led by another broker: its rows go all the same
                self.storage.drop_partition(topic.meta.topic_id, index, self.work)
                continue
            partition.delete()
            self.unflushed.discard(partition)
        for groups in self.group_coordinators():
            groups.delete_topic(name)
            groups.topics_changed()
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, count: int, now_ms: int, *, validate_only: bool = False,
                          assignments: list[list[int]] | None = None) -> None:
        """CreatePartitions: grow ``name`` to ``count``; ``assignments``: the new partitions' replicas."""
        self.check_controller()
        topic = self.topic(name)
        current = len(topic.partitions)
        if count == current:
            raise KafkaError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if count < current:
            raise KafkaError(
                Errors.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
            )
        if count > MAX_PARTITIONS:
            raise KafkaError(
                Errors.INVALID_PARTITIONS, f"Number of partitions {count} exceeds the limit of {MAX_PARTITIONS}."
            )
        check_room_for_partitions(count - current, self.storage.descriptors_per_partition)
        if validate_only:
            return
        if assignments or any(topic.meta.assignments):
            # Partitions without an assignment keep an empty one (led by the rendezvous choice).
            known = [topic.meta.assigned(index) for index in range(current)]
            topic.meta.assignments = known + (list(assignments) if assignments else [[] for _ in range(current, count)])
        self._open_new_partitions(topic, count, now_ms)
        topic.meta.partitions = count
        self.store.save()
        for groups in self.group_coordinators():
            groups.topics_changed()

    def set_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace the topic's overrides (AlterConfigs) — IncrementalAlterConfigs computes the dict."""
        self.check_controller()
        topic = self.topic(name)
        log_config = self.validate_topic_configs(configs)
        if validate_only:
            return
        topic.meta.configs = dict(configs)
        topic.log_config = log_config
        for partition in topic.led():
            partition.config = log_config
        self.store.save()

    # -- config descriptions (DescribeConfigs, CreateTopics v5+) ------------------------------

    def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        """Every topic config of ``name`` with Kafka's sources and synonyms (canonical values)."""
        return self.topic_config_description(self.topic(name).meta.configs)

    def topic_config_description(self, overrides: dict[str, str], *, canonical: bool = True) -> list[ConfigEntry]:
        """What a topic with these overrides would report; CreateTopics passes canonical=False."""
        return config_descriptions.topic_config_description(self, overrides, canonical=canonical)

    def describe_broker_configs(self) -> list[ConfigEntry]:
        """DescribeConfigs of this broker (see config_descriptions)."""
        return config_descriptions.describe_broker_configs(self)

    def describe_cluster_default_configs(self) -> list[ConfigEntry]:
        """DescribeConfigs of the broker resource "" (the cluster-wide dynamic defaults)."""
        return config_descriptions.describe_cluster_default_configs(self)

    # -- housekeeping -------------------------------------------------------------------------

    def all_partitions(self) -> list[Partition]:
        return [p for topic in self.topics.values() for p in topic.partitions if p is not None]

    def apply_retention(self, now_ms: int) -> None:
        for partition in self.all_partitions():
            partition.apply_retention(now_ms)

    def expire_producers(self, now_ms: int) -> int:
        """Drop idempotent producers idle past ``producer.id.expiration.ms``."""
        expiration = self.config.producer_id_expiration_ms
        return sum(p.producers.expire(now_ms, expiration) for p in self.all_partitions())

    @property
    def coordinator_writes(self) -> int:
        """Entries appended to the coordinators' logs since start (the server waits for an fsync
        before answering a request that wrote any, under ``fsync=always``)."""
        shares = self.leader_shares.appended if self.leader_shares is not None else 0
        return self._dropped_appends + shares + sum(shard.appended for shard in self.shards.values())

    def close(self) -> None:
        """Finish the queued file work, flush everything and leave clean-shutdown markers."""
        run_all(self.work.take())
        partitions = self.all_partitions()
        if self.storage.closes_in_parallel and len(partitions) > 1:
            # Each close fsyncs a few files: overlapped, 10,000 partitions close in seconds.
            with ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="kproto-close") as pool:
                for _ in pool.map(lambda partition: partition.close(), partitions):
                    pass
        else:
            for partition in partitions:
                partition.close()
        for shard in self.shards.values():
            shard.close()
        if self.leader_shares is not None:
            self.leader_shares.close()
        self.membership.close()
        self.storage.close()
        if self.lock is not None:
            self.lock.release()
