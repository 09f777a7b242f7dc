"""The native log of one topic-partition: segments, indexes, recovery, retention."""

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.partition_log import AppendInfo, PartitionLog, ReadResult

__all__ = ["AppendInfo", "LogConfig", "PartitionLog", "ReadResult"]
