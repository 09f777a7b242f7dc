"""One topic-partition: its rules (``Partition``), the engine protocol, and the native log."""

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.engine import EngineLog
from rivven_kproto.broker.log.partition import AppendInfo, Partition, ReadResult
from rivven_kproto.broker.log.partition_log import NativeEngineLog, open_partition

__all__ = ["AppendInfo", "EngineLog", "LogConfig", "NativeEngineLog", "Partition", "ReadResult", "open_partition"]
