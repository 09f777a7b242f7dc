"""One topic-partition: its rules (``Partition``), the engine protocol, and the native log."""

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.engine import EngineLog
from rivven_kproto.broker.log.native_engine import NativeEngineLog, open_partition
from rivven_kproto.broker.log.partition import AppendInfo, Partition, ReadResult

__all__ = ["AppendInfo", "EngineLog", "LogConfig", "NativeEngineLog", "Partition", "ReadResult", "open_partition"]
