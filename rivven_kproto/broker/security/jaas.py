"""The one JAAS line Kafka brokers use for PLAIN users:
``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret" ...;``."""

from __future__ import annotations

import re

_OPTION = re.compile(r'([\w.$-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def plain_users(jaas: str) -> dict[str, str]:
    """``user_<name>="<password>"`` options of a PlainLoginModule line (other options ignored)."""
    if PLAIN_MODULE not in jaas:
        raise ValueError(f"expected a {PLAIN_MODULE} line, got {jaas[:60]!r}")
    return {
        key[len("user_") :]: value.replace('\\"', '"').replace("\\\\", "\\")
        for key, value in _OPTION.findall(jaas)
        if key.startswith("user_")
    }
