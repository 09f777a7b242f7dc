"""What a handler may see: the broker, the config, the clock reading and the caller."""

from __future__ import annotations

from dataclasses import dataclass, field

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.log.partition_log import PartitionLog


@dataclass
class RequestContext:
    broker: Broker
    config: BrokerConfig
    now_ms: int
    client_id: str | None = None
    client_host: str = ""  # Kafka's form, "/127.0.0.1" (DescribeGroups reports it per member)
    # Filled by the server after an append so that waiters (fetch long-poll, fsync) can react.
    appended: bool = False
    # Logs this request wrote to, for the durability policy (fsync, flush.messages).
    touched: list[PartitionLog] = field(default_factory=list)

    @property
    def advertised(self) -> tuple[str, int]:
        return self.config.advertised
