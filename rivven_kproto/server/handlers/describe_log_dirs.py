"""DescribeLogDirs (key 35), versions 0-4: each partition's size on disk, for the data directory.

The broker has one log directory, its data directory. As Kafka: the caller needs Describe on the
Cluster (otherwise an empty answer, with CLUSTER_AUTHORIZATION_FAILED from v3); null topics mean
every topic; partitions this broker does not hold are left out rather than reported as errors.
The offset lag is always 0 (no future logs, one replica).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from rivven_kproto.server.context import RequestContext

from ..routes import LOCAL

API_KEY = DescribeLogDirsRequest.API_KEY
ROUTE = LOCAL
RULE = rule(API_KEY)


def handle(ctx: RequestContext, request: DescribeLogDirsRequest, version: int) -> DescribeLogDirsResponse:
    (check,) = RULE.applying(version)  # v0-2: an empty answer; v3+: CLUSTER_AUTHORIZATION_FAILED
    if not ctx.permits(check):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=check.error or Errors.NONE, results=[])
    broker = ctx.broker
    wanted: dict[str, set[int]] = {}
    if request.topics is None:
        wanted = {name: set(range(len(topic.partitions))) for name, topic in broker.topics.items()}
    else:
        for entry in request.topics:  # Kafka keys the request by topic: a repeated topic merges
            wanted.setdefault(entry.topic, set()).update(entry.partitions)
    topics = []
    for name, indexes in wanted.items():
        topic = broker.topics.get(name)
        if topic is None:
            continue
        led = {index: log for index, log in enumerate(topic.partitions) if log is not None}
        partitions = [
            DescribeLogDirsPartition(
                partition_index=index, partition_size=led[index].size_bytes, offset_lag=0, is_future_key=False,
            )
            for index in sorted(indexes)
            if index in led
        ]
        if partitions:
            topics.append(DescribeLogDirsTopic(name=name, partitions=partitions))
    log_dir = str(broker.data_dir.resolve())
    usage = shutil.disk_usage(_existing(broker.data_dir.resolve()))
    result = DescribeLogDirsResult(
        error_code=Errors.NONE, log_dir=log_dir, topics=topics, total_bytes=usage.total, usable_bytes=usage.free
    )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=Errors.NONE, results=[result])


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent: a database store creates no data directory."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path
