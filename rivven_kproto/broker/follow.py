"""Following the cluster: what a broker on a shared store does with each heartbeat's pulse.

The server's heartbeat (server/cluster.py) reads a ``Pulse`` off the loop; these steps adopt it
on the loop: the live brokers and the controller's topic catalog, the partitions this broker leads
now (opened off the loop, then installed) and those it lets go of, and the documents (ACLs,
credentials, dynamic configs) the controller changed. A broker alone never runs them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .broker import FOLLOWED_DOCUMENTS, Broker, Topic
from .dynamic_configs import FILE_NAME as DYNAMIC_CONFIGS_FILE
from .group_configs import FILE_NAME as GROUP_CONFIGS_FILE
from .log.config import LogConfig
from .log.partition import Partition
from .membership import Pulse
from .security.acls import FILE_NAME as ACLS_FILE
from .security.scram import FILE_NAME as SCRAM_FILE
from .storage import StorageError
from .topics import TopicMeta

log = logging.getLogger(__name__)


def apply_pulse(broker: Broker, pulse: Pulse) -> list[tuple[TopicMeta, int, LogConfig]]:
    """On the loop, after a heartbeat: adopt the live brokers and (unless this broker writes
    it) the topic catalog; let go of partitions another broker leads now (their writes still
    commit with the next round, unless that broker claimed them first). Returns the partitions
    this broker leads now and has not opened: ``open_partitions`` (off the loop), then ``install``."""
    broker.cluster = broker.view_of(pulse)
    if not broker.cluster.is_coordinator and pulse.catalog is not None and pulse.catalog != broker.catalog_seen:
        adopt_catalog(broker, broker.store.parse(pulse.catalog))
        broker.catalog_seen = pulse.catalog
    wanted: list[tuple[TopicMeta, int, LogConfig]] = []
    for topic in broker.topics.values():
        for index, partition in enumerate(topic.partitions):
            led = broker.cluster.leads(topic.meta.topic_id, index, topic.meta.assigned(index))
            if partition is not None and (partition.fenced or not led):
                log.info("node %d no longer leads %s-%d", broker.config.node_id, topic.name, index)
                topic.partitions[index] = partition = None
            if partition is None and led:
                wanted.append((topic.meta, index, topic.log_config))
    return wanted


def fence(broker: Broker, lost: list[Partition]) -> None:
    """Partitions another broker claimed in the store while this one's claims had lapsed:
    served no more (``apply_pulse`` lets go of them, and opens again those this broker leads,
    reading them from the store)."""
    for partition in lost:
        log.warning("node %d: %s was claimed by another broker meanwhile; its log here is stale",
                    broker.config.node_id, partition.name)
        partition.fenced = True


def take_doubted(broker: Broker) -> list[Partition]:
    """The logs of the partitions clients fetched past the end of since the last heartbeat (whose
    claims that heartbeat checks in the store); the set starts again empty."""
    logs = []
    for name, index in broker.doubted:
        topic = broker.topics.get(name)
        partition = topic.partitions[index] if topic is not None and index < len(topic.partitions) else None
        if partition is not None and not partition.fenced:
            logs.append(partition)
    broker.doubted.clear()
    return logs


def open_partitions(broker: Broker, wanted: list[tuple[TopicMeta, int, LogConfig]], now_ms: int) -> list[
        tuple[TopicMeta, int, Partition]]:
    """Worker thread: load (and claim) partitions from the store; nothing of the loop's is touched."""
    opened = []
    for meta, index, log_config in wanted:
        try:
            opened.append((meta, index, broker.open_partition(meta, index, log_config, now_ms, new=False)))
        except (OSError, StorageError):
            log.exception("opening %s-%d failed; retried at the next heartbeat", meta.name, index)
    return opened


def install(broker: Broker, opened: list[tuple[TopicMeta, int, Partition]]) -> None:
    """On the loop: serve the partitions just opened that this broker still leads."""
    for meta, index, partition in opened:
        topic = broker.topics.get(meta.name)
        if (topic is None or topic.meta.topic_id != meta.topic_id or index >= len(topic.partitions)
                or topic.partitions[index] is not None or not broker.cluster.leads(meta.topic_id, index, meta.assigned(index))):
            continue
        topic.partitions[index] = partition
        log.info("node %d leads %s-%d from offset %d", broker.config.node_id, meta.name, index,
                 partition.log_end_offset)


def adopt_catalog(broker: Broker, metas: dict[str, TopicMeta]) -> None:
    """Another broker (the controller) changed the topic catalog: follow it."""
    log.info("node %d follows the controller's topic catalog (%d topics)", broker.config.node_id, len(metas))
    for name, topic in list(broker.topics.items()):
        meta = metas.get(name)
        if meta is None or meta.topic_id != topic.meta.topic_id:
            del broker.topics[name]
            log.info("topic %s was deleted by the controller", name)
    for name, meta in metas.items():
        existing = broker.topics.get(name)
        if existing is None:
            broker.topics[name] = Topic(meta, broker.log_config_of(meta.configs), [None] * meta.partitions)
            continue
        topic = existing
        if meta.partitions > len(topic.partitions):
            topic.partitions.extend([None] * (meta.partitions - len(topic.partitions)))
        if meta.configs != topic.meta.configs:
            topic.log_config = broker.log_config_of(meta.configs)
            for partition in topic.led():
                partition.config = topic.log_config
        topic.meta = meta
    broker.store.topics = dict(metas)


def documents_to_reload(broker: Broker, pulse: Pulse) -> list[str]:
    """The ACLs, SCRAM credentials, dynamic broker configs and group configs the controller
    changed since this broker last read them (their digests differ). The controller itself never
    reloads: it writes them, and the store may not have its latest change yet."""
    if broker.cluster.is_coordinator:
        return []
    return [name for name in FOLLOWED_DOCUMENTS if pulse.documents.get(name) != broker.documents_seen.get(name)]


def reload_documents(broker: Broker, contents: dict[str, bytes | None], digests: Mapping[str, str]) -> None:
    """On the loop: follow the controller's changes (read off the loop as ``contents``), so
    that a revoked ACL or a deleted user stops working here too, at the next heartbeat."""
    if broker.cluster.is_coordinator:
        return  # took the lease meanwhile: its own copies are the truth from now on
    for name, data in contents.items():
        if name == ACLS_FILE and broker.authorizer is not None:
            broker.authorizer.reload(data)
        elif name == SCRAM_FILE:
            broker.scram.reload(data)
        elif name == DYNAMIC_CONFIGS_FILE:
            broker.dynamic.reload(data)
            broker.apply_log_defaults()
        elif name == GROUP_CONFIGS_FILE:
            broker.group_configs.reload(data)
        broker.documents_seen[name] = digests.get(name)
        log.info("node %d follows the controller's %s", broker.config.node_id, name)
