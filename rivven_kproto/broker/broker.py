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
    <data_dir>/<topic>-<partition>/   one PartitionLog each (see broker.log)
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rivven_kproto.codec.errors import Errors, KafkaError

from .claims import ClaimsLease
from .cluster import ClusterView, Node, shard_of
from .config import BrokerConfig
from .coordinator_shards import (
    GROUP_SHARD_TOPIC,
    REMOTE_MARKER_EPOCH,
    CoordinatorShard,
    GroupsPending,
    complete_producer,
    log_names,
    share_log_name,
)
from .datadir_lock import DataDirLock
from .descriptors import check_room_for_partitions
from .durable.work import BlockingWork, run_all
from .dynamic_configs import CLUSTER_DEFAULT, TOPIC_KEY_OF, DynamicBrokerConfigs
from .dynamic_configs import FILE_NAME as DYNAMIC_CONFIGS_FILE
from .faults import fault_point
from .file_modes import make_private_dir, warn_if_loose
from .groups import GroupCoordinator
from .log.base import PartitionLogBase
from .log.config import LogConfig
from .producer_ids import ProducerIdAllocator
from .remote_markers import RemoteMarker, RemoteMarkers
from .security.acls import FILE_NAME as ACLS_FILE
from .security.acls import Authorizer
from .security.listeners import describe_listeners
from .security.scram import FILE_NAME as SCRAM_FILE
from .security.scram import ScramStore
from .share import ShareCoordinator
from .storage import Pulse, StorageError, is_native, open_storage
from .topics import (
    TOPIC_CONFIG_DEFAULTS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    TopicMeta,
    TopicStore,
    collision_key,
    describe_topic_configs,
    validate_topic_config_values,
    validate_topic_name,
)
from .txn.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000
CLOSE_THREADS = 8  # partitions closed at once at shutdown (each fsyncs its files)
# Documents the controller writes and the other brokers of a shared store re-read when they change.
FOLLOWED_DOCUMENTS = (ACLS_FILE, SCRAM_FILE, DYNAMIC_CONFIGS_FILE)
COORDINATOR_EPOCH = 0  # one broker: the coordinator never moves


@dataclass
class Topic:
    meta: TopicMeta
    log_config: LogConfig
    # By index; None where another broker leads the partition (a store shared by several brokers).
    partitions: list[PartitionLogBase | None] = field(default_factory=list)

    def led(self) -> list[PartitionLogBase]:
        return [p for p in self.partitions if p is not None]

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def compression_type(self) -> str:
        return self.meta.configs.get("compression.type", "producer").strip()  # Kafka trims values


class Broker:
    """All topics of one node; the single owner of every PartitionLog."""

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
        self.unflushed: set[PartitionLogBase] = set()  # written by the broker itself (markers) since the last flush
        self.storage = open_storage(config.storage, self.data_dir, standby=config.storage_standby,
                                    node=(config.node_id, *config.advertised), assign_node_id=config.assign_node_id,
                                    start_wait_s=config.storage_start_wait_ms / 1000)
        if self.storage.assigned_node_id is not None:  # no --node-id: the shared store gave one
            config = self.config = dataclasses.replace(config, node_id=self.storage.assigned_node_id)
            log.info("serving as node %d (assigned by the %s store)", config.node_id, self.storage.kind)
        try:
            self._load(config, now_ms)
        except BaseException:
            self.storage.close()
            raise

    def _load(self, config: BrokerConfig, now_ms: int) -> None:
        storage = self.storage
        self.cluster_id = storage.cluster_id(config.node_id)
        # Which partitions this broker leads and whether it coordinates (alone: all, and yes).
        self.cluster = ClusterView.alone(config.node_id, *config.advertised)
        # What this broker leads and coordinates holds while its heartbeat is fresh (see claims):
        # the first heartbeat confirms it from the time it started.
        self.claims = ClaimsLease(storage.session_timeout_s, storage.heartbeat_interval_s)
        pulse = storage.heartbeat(*config.advertised)
        if pulse is not None:
            self.cluster = self._view(pulse)
        self.store = TopicStore(storage.document("topics.json"), self.work)
        self.producer_ids = ProducerIdAllocator(storage.producer_id_blocks(), work=self.work)
        self.scram = ScramStore(storage.document(SCRAM_FILE), self.work)
        self.dynamic = DynamicBrokerConfigs(storage.document(DYNAMIC_CONFIGS_FILE), self.work)
        self.log_defaults = self._dynamic_log_defaults()
        self.authorizer = (
            Authorizer(storage.document(ACLS_FILE), config.super_users, config.allow_everyone_if_no_acl_found, self.work)
            if config.authorizer_enabled
            else None
        )
        self.remote_markers = RemoteMarkers()
        self.catalog_seen = pulse.catalog if pulse is not None else None
        # The digests of the followed documents as loaded above (the pulse was read before them:
        # a change in between is seen as one at the next heartbeat, and read again).
        self.documents_seen = {name: pulse.documents.get(name) for name in FOLLOWED_DOCUMENTS} if pulse else {}
        self.topics: dict[str, Topic] = {}
        for meta in self.store.topics.values():
            topic = Topic(meta, self._log_config(meta.configs))
            for index in range(meta.partitions):
                led = self.cluster.leads(meta.topic_id, index)
                topic.partitions.append(
                    self._open_partition(meta, index, topic.log_config, now_ms, new=False) if led else None)
            self.topics[meta.name] = topic
        # The coordinator shards this broker serves (see coordinator_shards), loaded from the
        # store; alone (the native log): the one shard, always.
        self.shard_count = storage.coordinator_shards
        self.shards: dict[int, CoordinatorShard] = {}
        self._dropped_appends = 0  # coordinator log entries of shards handed over (``coordinator_writes``)
        self.shards_dropped = 0  # coordinator shards handed over or lost so far (parked group requests re-check)
        for shard in self.cluster.shards_of(config.node_id):
            self.load_shard(shard, now_ms)

    def _make_shard(self, shard: int) -> CoordinatorShard:
        """A shard's group and transaction coordinators, empty until loaded."""
        config, storage = self.config, self.storage
        groups_log, txn_log = log_names(shard, self.shard_count)
        groups = GroupCoordinator(None, config.groups, work=self.work,
                                  durable_log=storage.coordinator_log(groups_log, self.work, shard))
        groups.topic_view = lambda: {name: len(t.partitions) for name, t in self.topics.items()}
        txn = TransactionCoordinator(
            storage.coordinator_log(txn_log, self.work, shard),
            self.producer_ids.allocate,
            self.write_markers,
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
        )
        # Transactional offsets become visible (or are dropped) with their transaction; the groups
        # are loaded first so that recovery can finish transactions that hold offsets.
        txn.complete_groups = self.complete_groups
        return CoordinatorShard(shard, groups, txn, self._make_share(shard, groups))

    def _make_share(self, shard: int, groups: GroupCoordinator) -> ShareCoordinator | None:
        """The shard's share coordinator (KIP-932), on the native log only (phase 1)."""
        if not self.share_enabled:
            return None
        share = ShareCoordinator(self.config.share, self.storage.coordinator_log(
            share_log_name(shard, self.shard_count), self.work, shard))
        share.topic_view = lambda: {name: len(t.partitions) for name, t in self.topics.items()}
        share.other_kind = lambda group_id: group_id in groups.groups or group_id in groups.consumer_groups
        return share

    @property
    def share_enabled(self) -> bool:
        """Share groups are served: group.share.enable and the native log (not PostgreSQL yet)."""
        return self.config.share.enabled and self.config.storage is None

    def share_coordinator(self, group_id: str) -> ShareCoordinator | None:
        """The share coordinator of this group here (None: not here, or share groups are off)."""
        shard = self.shards.get(self.shard_of(group_id)) if self.claims.valid else None
        return shard.share if shard is not None else None

    def read_shard(self, shard: int) -> CoordinatorShard:
        """Worker thread: a shard this broker took over, its logs read from the store (then
        ``load_shard`` replays them on the loop without waiting for the database)."""
        made = self._make_shard(shard)
        made.groups.log.preload()
        made.txn.log.preload()
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
            self.remote_markers.forget(dropped.txn.by_producer.keys())
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

    def complete_groups(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """A transaction's completion in the groups it carried offsets of: by their shard's
        coordinator here, or a marker to the broker holding their shard (GroupsPending until it
        acknowledged; the transaction coordinator retries)."""
        by_shard: dict[int, list[str]] = {}
        for group_id in group_ids:
            by_shard.setdefault(self.shard_of(group_id), []).append(group_id)
        pending = []
        for shard, ids in sorted(by_shard.items()):
            local = self.shards.get(shard)
            if local is not None:
                local.groups.complete_transaction(producer_id, ids, commit)
                continue
            marker = RemoteMarker(producer_id, REMOTE_MARKER_EPOCH, commit, GROUP_SHARD_TOPIC, shard)
            if not self.remote_markers.written(marker):
                pending.append(shard)
        if pending:
            raise GroupsPending(f"producer {producer_id}'s offsets in group shards {pending} are not completed yet")

    def _view(self, pulse: Pulse) -> ClusterView:
        nodes = pulse.nodes
        if all(node.node_id != self.config.node_id for node in nodes):  # not seen yet: it is alive
            nodes = (*nodes, Node(self.config.node_id, *self.config.advertised))
        return ClusterView(self.config.node_id, tuple(sorted(nodes, key=lambda n: n.node_id)), pulse.coordinator_id,
                           self.storage.coordinator_shards, dict(pulse.shard_owners), pulse.departed)

    # -- the cluster (several brokers on one store) ---------------------------------------------

    def apply_pulse(self, pulse: Pulse) -> list[tuple[TopicMeta, int, LogConfig]]:
        """On the loop, after a heartbeat: adopt the live brokers and (unless this broker writes
        it) the topic catalog; let go of partitions another broker leads now (their writes still
        commit with the next round, unless that broker claimed them first). Returns the partitions
        this broker leads now and has not opened: ``open_partitions`` (off the loop), then ``install``."""
        self.cluster = self._view(pulse)
        if not self.cluster.is_coordinator and pulse.catalog is not None and pulse.catalog != self.catalog_seen:
            self._adopt_catalog(self.store.parse(pulse.catalog))
            self.catalog_seen = pulse.catalog
        wanted: list[tuple[TopicMeta, int, LogConfig]] = []
        for topic in self.topics.values():
            for index, partition in enumerate(topic.partitions):
                led = self.cluster.leads(topic.meta.topic_id, index)
                if partition is not None and (partition.fenced or not led):
                    log.info("node %d no longer leads %s-%d", self.config.node_id, topic.name, index)
                    topic.partitions[index] = partition = None
                if partition is None and led:
                    wanted.append((topic.meta, index, topic.log_config))
        return wanted

    def led_logs(self) -> list[PartitionLogBase]:
        """The logs of every partition this broker leads (as far as it knows)."""
        return [partition for topic in self.topics.values() for partition in topic.led()]

    def fence(self, lost: list[PartitionLogBase]) -> None:
        """Partitions another broker claimed in the store while this one's claims had lapsed:
        served no more (``apply_pulse`` lets go of them, and opens again those this broker leads,
        reading them from the store)."""
        for partition in lost:
            log.warning("node %d: %s was claimed by another broker meanwhile; its log here is stale",
                        self.config.node_id, partition.name)
            partition.fenced = True

    def open_partitions(self, wanted: list[tuple[TopicMeta, int, LogConfig]], now_ms: int) -> list[
            tuple[TopicMeta, int, PartitionLogBase]]:
        """Worker thread: load (and claim) partitions from the store; nothing of the loop's is touched."""
        opened = []
        for meta, index, log_config in wanted:
            try:
                opened.append((meta, index, self._open_partition(meta, index, log_config, now_ms, new=False)))
            except (OSError, StorageError):
                log.exception("opening %s-%d failed; retried at the next heartbeat", meta.name, index)
        return opened

    def install(self, opened: list[tuple[TopicMeta, int, PartitionLogBase]]) -> None:
        """On the loop: serve the partitions just opened that this broker still leads."""
        for meta, index, partition in opened:
            topic = self.topics.get(meta.name)
            if (topic is None or topic.meta.topic_id != meta.topic_id or index >= len(topic.partitions)
                    or topic.partitions[index] is not None or not self.cluster.leads(meta.topic_id, index)):
                continue
            topic.partitions[index] = partition
            log.info("node %d leads %s-%d from offset %d", self.config.node_id, meta.name, index,
                     partition.log_end_offset)

    def _adopt_catalog(self, metas: dict[str, TopicMeta]) -> None:
        """Another broker (the controller) changed the topic catalog: follow it."""
        log.info("node %d follows the controller's topic catalog (%d topics)", self.config.node_id, len(metas))
        for name, topic in list(self.topics.items()):
            meta = metas.get(name)
            if meta is None or meta.topic_id != topic.meta.topic_id:
                del self.topics[name]
                log.info("topic %s was deleted by the controller", name)
        for name, meta in metas.items():
            existing = self.topics.get(name)
            if existing is None:
                self.topics[name] = Topic(meta, self._log_config(meta.configs), [None] * meta.partitions)
                continue
            topic = existing
            if meta.partitions > len(topic.partitions):
                topic.partitions.extend([None] * (meta.partitions - len(topic.partitions)))
            if meta.configs != topic.meta.configs:
                topic.log_config = self._log_config(meta.configs)
                for partition in topic.led():
                    partition.config = topic.log_config
            topic.meta = meta
        self.store.topics = dict(metas)

    def documents_to_reload(self, pulse: Pulse) -> list[str]:
        """The ACLs, SCRAM credentials and dynamic broker configs the controller changed since this
        broker last read them (their digests differ). The controller itself never reloads: it
        writes them, and the store may not have its latest change yet."""
        if self.cluster.is_coordinator:
            return []
        return [name for name in FOLLOWED_DOCUMENTS if pulse.documents.get(name) != self.documents_seen.get(name)]

    def reload_documents(self, contents: dict[str, bytes | None], digests: Mapping[str, str]) -> None:
        """On the loop: follow the controller's changes (read off the loop as ``contents``), so
        that a revoked ACL or a deleted user stops working here too, at the next heartbeat."""
        if self.cluster.is_coordinator:
            return  # took the lease meanwhile: its own copies are the truth from now on
        for name, data in contents.items():
            if name == ACLS_FILE and self.authorizer is not None:
                self.authorizer.reload(data)
            elif name == SCRAM_FILE:
                self.scram.reload(data)
            elif name == DYNAMIC_CONFIGS_FILE:
                self.dynamic.reload(data)
                self._apply_log_defaults()
            self.documents_seen[name] = digests.get(name)
            log.info("node %d follows the controller's %s", self.config.node_id, name)

    def _flush_unflushed(self, now_ms: int) -> None:
        """At load only (nothing is served yet): make the markers recovery wrote durable."""
        for partition in self.unflushed:
            partition.flush(now_ms)
        self.unflushed.clear()

    def _open_partition(
        self, meta: TopicMeta, index: int, log_config: LogConfig, now_ms: int, *, new: bool = True
    ) -> PartitionLogBase:
        return self.storage.open_partition(meta.topic_id, meta.name, index, log_config, now_ms, self.work, new=new)

    def _open_new_partitions(self, topic: Topic, count: int, now_ms: int) -> None:
        """Open the partitions up to ``count`` that this broker leads (the others are opened by
        their leaders when they see the catalog), all or none: when one fails (the disk, the
        open-files limit), those just opened are deleted again and the request gets the error."""
        first = len(topic.partitions)
        try:
            for index in range(first, count):
                led = self.cluster.leads(topic.meta.topic_id, index)
                topic.partitions.append(self._open_partition(topic.meta, index, topic.log_config, now_ms) if led else None)
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

    def _log_config(self, overrides: dict[str, str]) -> LogConfig:
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
            self.dynamic.check(values, self.config.log)
            return
        self.dynamic.replace(name, values, self.config.log)
        self._apply_log_defaults()
        log.info("dynamic broker configs of %s now %s", name or "the cluster default", values)

    def _apply_log_defaults(self) -> None:
        """The dynamic broker configs changed: topics without their own override follow at once."""
        self.log_defaults = self._dynamic_log_defaults()
        for topic in self.topics.values():
            topic.log_config = self._log_config(topic.meta.configs)
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

    def partition(self, name: str, index: int) -> PartitionLogBase:
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
        return self._log_config(configs)

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
    ) -> Topic | None:
        """CreateTopics semantics: -1 means the broker default for partitions / replication.

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
        meta = TopicMeta(name, uuid.uuid4(), partitions, dict(configs), replicas)
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

    def create_partitions(self, name: str, count: int, now_ms: int, *, validate_only: bool = False) -> None:
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
        static_values = log_config_strings(self.config.log)
        static = {key: value for key, value in static_values.items() if _KAFKA_LOG_DEFAULTS.get(key) != value}
        effective = log_config_strings(self.log_defaults)
        dynamic = {TOPIC_KEY_OF[key]: chain for key, chain in self._dynamic_synonyms().items()}
        return describe_topic_configs(overrides, {**TOPIC_CONFIG_DEFAULTS, **effective}, static, canonical=canonical,
                                      dynamic=dynamic)

    def _dynamic_synonyms(self) -> dict[str, list[ConfigSynonym]]:
        """Per broker key, its dynamic synonyms in precedence order (this node, then the default):
        the head of the chain both a broker's and a topic's description report."""
        chain: dict[str, list[ConfigSynonym]] = {}
        for level, source in ((str(self.config.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (CLUSTER_DEFAULT, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
            for key, value in self.dynamic.level(level).items():
                chain.setdefault(key, []).append(ConfigSynonym(key, value, source))
        return chain

    def describe_broker_configs(self) -> list[ConfigEntry]:
        """The broker settings we honour, sorted by name (Kafka's describe of a broker id).

        The log defaults are dynamic (not read-only): their chain is this node's dynamic value,
        the cluster default, the static setting (where it differs from our default), the default;
        the value and source are the chain's first. Everything else is read-only.
        """
        current = _broker_settings(self.config)
        default = _broker_settings(BrokerConfig())
        # Ours, read from the store: group and transactional ids hash to this many coordinator shards.
        current["coordinator.shards"] = default["coordinator.shards"] = (ConfigType.INT, str(self.shard_count))
        dynamic = self._dynamic_synonyms()
        entries = []
        for name in sorted(current):
            config_type, value = current[name]
            default_value = default[name][1]
            synonyms = list(dynamic.get(name, ()))
            if value != default_value:
                synonyms.append(ConfigSynonym(name, value, ConfigSource.STATIC_BROKER_CONFIG))
            if default_value is not None:
                synonyms.append(ConfigSynonym(name, default_value, ConfigSource.DEFAULT_CONFIG))
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            value = synonyms[0].value if synonyms else value
            entries.append(ConfigEntry(name, value, source, config_type, read_only=name not in TOPIC_KEY_OF,
                                       synonyms=tuple(synonyms)))
        return entries

    def describe_cluster_default_configs(self) -> list[ConfigEntry]:
        """The broker resource "": only the cluster-wide dynamic defaults that are set (Kafka's answer)."""
        types = {name: config_type for name, (config_type, _) in _broker_settings(self.config).items()}
        return [
            ConfigEntry(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, types.get(name, ConfigType.STRING),
                        synonyms=(ConfigSynonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),))
            for name, value in sorted(self.dynamic.level(CLUSTER_DEFAULT).items())
        ]

    # -- housekeeping -------------------------------------------------------------------------

    def all_partitions(self) -> list[PartitionLogBase]:
        return [p for topic in self.topics.values() for p in topic.partitions if p is not None]

    def apply_retention(self, now_ms: int) -> None:
        for partition in self.all_partitions():
            partition.apply_retention(now_ms)

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[tuple[str, int]], now_ms: int
    ) -> set[tuple[str, int]]:
        """Write a COMMIT/ABORT marker to each partition; returns those that failed (to retry).

        A partition whose topic was deleted meanwhile needs no marker and counts as written.
        """
        failed: set[tuple[str, int]] = set()
        for written, (topic, index) in enumerate(partitions, start=1):
            if topic == GROUP_SHARD_TOPIC:  # a group shard the transaction committed offsets in (V2)
                if not self._mark_group_shard(producer_id, producer_epoch, commit, index):
                    failed.add((topic, index))
                continue
            owner = self.topics.get(topic)
            if owner is None or not 0 <= index < len(owner.partitions):
                continue
            log_ = owner.partitions[index]
            if log_ is None or log_.fenced:  # led by another broker: it writes the marker (WriteTxnMarkers)
                key = RemoteMarker(producer_id, producer_epoch, commit, topic, index)
                if not self.remote_markers.written(key):
                    failed.add((topic, index))
                continue
            try:
                log_.append_marker(producer_id, producer_epoch, commit, COORDINATOR_EPOCH, now_ms)
                self.unflushed.add(log_)
            except (KafkaError, OSError):
                log.exception("writing a transaction marker to %s-%d failed", topic, index)
                failed.add((topic, index))
            fault_point(f"txn-after-marker-{written}")
        return failed

    def _mark_group_shard(self, producer_id: int, producer_epoch: int, commit: bool, shard: int) -> bool:
        """A transaction's marker on a group shard: its groups' pending offsets of the producer
        installed or dropped, here or by the shard's holder (WriteTxnMarkers); True once done."""
        local = self.shards.get(shard)
        if local is None:
            return self.remote_markers.written(RemoteMarker(producer_id, producer_epoch, commit, GROUP_SHARD_TOPIC, shard))
        try:
            complete_producer(local.groups, producer_id, commit)
        except OSError:
            log.exception("completing producer %d's offsets in coordinator shard %d failed", producer_id, shard)
            return False
        return True

    def expire_producers(self, now_ms: int) -> int:
        """Drop idempotent producers idle past ``producer.id.expiration.ms``."""
        expiration = self.config.producer_id_expiration_ms
        return sum(p.producers.expire(now_ms, expiration) for p in self.all_partitions())

    @property
    def idempotent_producers_active(self) -> int:
        """Distinct producer ids with state on any partition (one producer writing to eight
        partitions is one producer)."""
        return len({pid for p in self.all_partitions() for pid in p.producers.producers})

    @property
    def idempotent_duplicates_total(self) -> int:
        return sum(p.producers.duplicates for p in self.all_partitions())

    @property
    def coordinator_writes(self) -> int:
        """Entries appended to the coordinators' logs since start (the server waits for an fsync
        before answering a request that wrote any, under ``fsync=always``)."""
        return self._dropped_appends + sum(shard.appended for shard in self.shards.values())

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
        self.storage.close()
        if self.lock is not None:
            self.lock.release()


def log_config_strings(config: LogConfig) -> dict[str, str]:
    long_max = str((1 << 63) - 1)
    return {
        "segment.bytes": str(config.segment_bytes),
        "segment.ms": str(config.segment_ms),
        "retention.ms": str(config.retention_ms),
        "retention.bytes": str(config.retention_bytes),
        "max.message.bytes": str(config.max_message_bytes),
        "index.interval.bytes": str(config.index_interval_bytes),
        "flush.messages": long_max if config.flush_messages is None else str(config.flush_messages),
        "flush.ms": long_max if config.flush_ms is None else str(config.flush_ms),
        "message.timestamp.type": config.message_timestamp_type,
    }


# Kafka's own defaults for the log settings (its LogConfig), to tell a static broker override
# (log.segment.bytes=... in server.properties) from a default when describing topic configs.
_KAFKA_LOG_DEFAULTS = log_config_strings(LogConfig())


def _broker_settings(config: BrokerConfig) -> dict[str, tuple[ConfigType, str | None]]:
    """Broker configs we honour, by their Kafka names (``fsync`` is ours), as strings."""
    log_config = config.log
    listeners = describe_listeners((config.primary_listener, *config.extra_listeners), config.advertised_host)
    long_max = str((1 << 63) - 1)
    return {
        **{name: (ConfigType.STRING, value) for name, value in listeners.items()},
        "node.id": (ConfigType.INT, str(config.node_id)),
        "broker.id": (ConfigType.INT, str(config.node_id)),
        "log.dirs": (ConfigType.STRING, str(config.data_dir)),
        "num.partitions": (ConfigType.INT, str(config.num_partitions)),
        "default.replication.factor": (ConfigType.INT, str(config.default_replication_factor)),
        "auto.create.topics.enable": (ConfigType.BOOLEAN, str(config.auto_create_topics).lower()),
        "delete.topic.enable": (ConfigType.BOOLEAN, str(config.delete_topic_enable).lower()),
        "fsync": (ConfigType.STRING, config.fsync),
        "log.flush.interval.ms": (ConfigType.LONG, str(config.flush_interval_ms)),
        "log.flush.interval.messages": (
            ConfigType.LONG,
            long_max if log_config.flush_messages is None else str(log_config.flush_messages),
        ),
        "log.retention.check.interval.ms": (ConfigType.LONG, str(config.retention_check_interval_ms)),
        "socket.request.max.bytes": (ConfigType.INT, str(config.socket_request_max_bytes)),
        "connections.max.idle.ms": (ConfigType.LONG, str(config.connections_max_idle_ms)),
        "log.segment.bytes": (ConfigType.INT, str(log_config.segment_bytes)),
        "log.roll.ms": (ConfigType.LONG, str(log_config.segment_ms)),
        "log.retention.ms": (ConfigType.LONG, str(log_config.retention_ms)),
        "log.retention.bytes": (ConfigType.LONG, str(log_config.retention_bytes)),
        "message.max.bytes": (ConfigType.INT, str(log_config.max_message_bytes)),
        "log.index.interval.bytes": (ConfigType.INT, str(log_config.index_interval_bytes)),
        "log.message.timestamp.type": (ConfigType.STRING, log_config.message_timestamp_type),
        "log.cleanup.policy": (ConfigType.LIST, "compact" if log_config.compact else "delete"),
    }
