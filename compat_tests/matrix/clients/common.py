"""Helpers shared by several client adapters."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# librdkafka (confluent-kafka, kcat) logs the broker's ApiVersions answer with debug=feature:
#   "...:   ApiKey Produce (0) Versions 0..11"
_API_LINE = re.compile(r"ApiKey \S+ \((\d+)\) Versions (\d+)\.\.(\d+)")


def librdkafka_api_versions(lines: Iterable[str]) -> dict[int, tuple[int, int]]:
    versions: dict[int, tuple[int, int]] = {}
    for line in lines:
        match = _API_LINE.search(line)
        if match:
            versions[int(match.group(1))] = (int(match.group(2)), int(match.group(3)))
    if not versions:
        raise AssertionError("librdkafka logged no ApiVersions answer (debug=feature)")
    return versions


def until(deadline: float, what: str, step: Callable[[], T], done: Callable[[T], bool]) -> T:
    """Call ``step`` until ``done(result)``; AssertionError naming ``what`` at the deadline."""
    while True:
        result = step()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {result!r:.300}")


def collect(seconds: float, count: int, fetch: Callable[[], list[T]], settle_s: float = 0.0) -> list[T]:
    """Call ``fetch`` until ``count`` items arrived or ``seconds`` passed, then for ``settle_s`` more
    (to catch records that should not be there). Returns what arrived; the caller asserts."""
    got: list[T] = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        got += fetch()
    settle = time.monotonic() + settle_s
    while time.monotonic() < settle:
        got += fetch()
    return got


def kafka_python_security(security: dict[str, str]) -> dict[str, Any]:
    """Kafka client properties (librdkafka's spelling) as kafka-python's and aiokafka's keywords;
    ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile`` are kafka-python's (aiokafka takes a context)."""
    if not security:
        return {}
    out: dict[str, Any] = {"security_protocol": security["security.protocol"]}
    for ours, theirs in (("ssl.ca.location", "ssl_cafile"), ("ssl.certificate.location", "ssl_certfile"),
                         ("ssl.key.location", "ssl_keyfile"), ("sasl.mechanism", "sasl_mechanism"),
                         ("sasl.username", "sasl_plain_username"), ("sasl.password", "sasl_plain_password")):
        if ours in security:
            out[theirs] = security[ours]
    return out
