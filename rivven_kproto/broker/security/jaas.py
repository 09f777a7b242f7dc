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


def login_credentials(jaas: str) -> tuple[str, str] | None:
    """The ``username``/``password`` options of a PlainLoginModule or ScramLoginModule line: the
    credentials a broker authenticates with to the other brokers (None: the line has none)."""
    options = {key: value.replace('\\"', '"').replace("\\\\", "\\") for key, value in _OPTION.findall(jaas)}
    if "username" not in options or "password" not in options:
        return None
    return options["username"], options["password"]
