"""The matrix's vocabulary: capabilities (rows), clients (columns), the context a cell runs in, outcomes.

A cell is one client exercising one capability. Each client module declares, for every capability,
either how it runs it (a method of its adapter, called by the generic scenario in
:mod:`.scenarios`) or why the client does not offer it (``not_offered``: rendered "n/a" with the
reason). :func:`check_client` refuses a client that leaves any capability undeclared, so nothing
can drop out of the table silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

PASS = "pass"
FAIL = "fail"
NA = "n/a"


@dataclass(frozen=True)
class Capability:
    id: str
    title: str
    timeout_s: float = 45.0
    topics: int = 1  # fresh 3-partition topics created for the cell before it runs
    secured: str = ""  # the secured profile (listener and identity) the cell connects with


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CAPABILITIES: tuple[Capability, ...] = (
    Capability("connect", "connect + ApiVersions", topics=0),
    Capability("metadata", "metadata"),
    *(Capability(f"codec-{codec}", f"produce/consume {codec}") for codec in CODECS),
    Capability("headers-nulls", "headers, null keys/values"),
    Capability("acks-0", "acks=0"),
    Capability("acks-1", "acks=1"),
    Capability("acks-all", "acks=all"),
    Capability("idempotent", "idempotent producer"),
    Capability("txn-commit", "transactional commit"),
    Capability("txn-abort", "transactional abort"),
    Capability("read-committed", "read_committed consume (no aborted, no control records)"),
    Capability("fencing", "producer fencing"),
    Capability("group-rebalance", "consumer group subscribe + rebalance", timeout_s=90.0),
    Capability("commit-offsets", "commit/fetch offsets", timeout_s=60.0),
    Capability("send-offsets-txn", "send offsets to transaction", timeout_s=60.0, topics=2),
    # KIP-848 (group.protocol=consumer): the broker assigns and reconciles incrementally.
    Capability("group-rebalance-kip848", "consumer group protocol (KIP-848) subscribe + rebalance", timeout_s=90.0),
    Capability("send-offsets-txn-kip848", "send offsets to transaction, KIP-848 group", timeout_s=60.0, topics=2),
    # #42: a classic group converted online when a consumer-protocol member joins, and back when it leaves.
    Capability("group-upgrade-kip848", "online group upgrade classic -> consumer protocol (KIP-848) and back",
               timeout_s=120.0),
    Capability("admin-topics", "admin create/describe/delete topics", topics=0),
    Capability("admin-configs", "admin describe/alter configs"),
    Capability("admin-replica-assignment", "admin explicit replica assignment (create topic, add partitions)",
               topics=0),
    Capability("config-sources-41", "Kafka 4.1 config sources (min.insync.replicas cluster default)"),
    Capability("list-config-resources", "ListConfigResources (Kafka 4.1, KIP-1142)"),
    Capability("offsets-by-time", "list offsets by time"),
    # KIP-932 (Kafka 4.2 GA): a share group, records handed out and acknowledged one by one.
    Capability("share-group", "share group (KIP-932) consume + acknowledge"),
    Capability("list-describe-txn", "list/describe transactions"),
    Capability("sec-tls", "TLS", secured="tls"),
    Capability("sec-mtls", "mTLS (client certificate)", secured="mtls"),
    Capability("sec-plain", "SASL/PLAIN over TLS", secured="plain"),
    Capability("sec-scram-256", "SASL/SCRAM-SHA-256 over TLS", secured="scram-256"),
    Capability("sec-scram-512", "SASL/SCRAM-SHA-512 over TLS", secured="scram-512"),
    Capability("acl-denied", "denied without ACL (the client reports it)", secured="denied"),
    Capability("acl-allowed", "allowed with ACL", secured="allowed"),
    Capability("acl-txn", "transactional producer with only Write on its id and topic", secured="txn-writer"),
)
SECURED_PROFILES = tuple(c.secured for c in CAPABILITIES if c.secured)

BY_ID = {capability.id: capability for capability in CAPABILITIES}


class ScenarioFailure(AssertionError):
    """A step of a scenario failed; the message names the step."""


@dataclass
class Ctx:
    """What a cell gets: where the broker is, its fresh topics, unique ids, and its time budget."""

    bootstrap: str
    topics: list[str]
    unique: str
    timeout_s: float
    started: float = field(default_factory=time.monotonic)
    # Kafka client properties in librdkafka's spelling (security.protocol, ssl.ca.location,
    # ssl.certificate.location, ssl.key.location, sasl.mechanism, sasl.username, sasl.password)
    # for the secured rows; every adapter applies them to each client it makes.
    security: dict[str, str] = field(default_factory=dict)
    plain_bootstrap: str = ""  # the broker's unsecured listener, for set-up and raw inspection

    @property
    def inspect_bootstrap(self) -> str:
        return self.plain_bootstrap or self.bootstrap

    @property
    def topic(self) -> str:
        return self.topics[0]

    def remaining(self, margin: float = 3.0) -> float:
        """Seconds left for a wait, keeping ``margin`` for teardown and reporting; at least 1."""
        return max(1.0, self.timeout_s - (time.monotonic() - self.started) - margin)

    def wait(self, limit: float = 15.0) -> float:
        """A bound for one wait on data: long enough on any healthy broker, short enough that a cell
        whose data never arrives fails with its own message before the cell's timeout."""
        return min(limit, self.remaining())

    def name(self, what: str) -> str:
        """A unique group id, transactional id or topic name for this cell."""
        return f"matrix-{what}-{self.unique}"

    def log_text(self) -> str:  # the shape test helpers expect of a broker (kcat/kafkajs error tails)
        return ""

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Label a failure with the step it happened in: ``consume read_committed: <error>``."""
        try:
            yield
        except ScenarioFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - every error becomes the cell's reason
            raise ScenarioFailure(f"{what}: {describe_error(exc)}") from exc


class ClientError(Exception):
    """An error a client in another process (node) reported; its text already names the error."""


def describe_error(exc: BaseException) -> str:
    """``Type: message``, followed by the underlying error when the client wrapped one."""
    if isinstance(exc, ClientError):
        return " ".join(str(exc).split())
    text = str(exc).strip() or repr(exc)
    name = type(exc).__name__
    line = text if text.startswith(name) else f"{name}: {text}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not isinstance(exc, ScenarioFailure) and str(cause) not in line:
        line += f" (from {describe_error(cause)})"
    return " ".join(line.split())


@dataclass
class Client:
    """A column: the adapter that drives the client, its version, and what it does not offer."""

    name: str
    adapter: Any
    version: Callable[[], dict[str, str]]
    not_offered: dict[str, str]


def check_client(client: Client) -> None:
    """Every capability is either served by the adapter or declared n/a with a reason, never both."""
    from .scenarios import SCENARIOS  # noqa: PLC0415 - scenarios imports this module

    for capability in CAPABILITIES:
        needs = SCENARIOS[capability.id].needs
        declared = capability.id in client.not_offered
        missing = [method for method in needs if not hasattr(client.adapter, method)]
        if declared and not client.not_offered[capability.id].strip():
            raise ValueError(f"{client.name}: n/a for {capability.id} without a reason")
        if not declared and missing:
            raise ValueError(f"{client.name}: {capability.id} needs {missing} or an n/a reason")
    unknown = set(client.not_offered) - set(BY_ID)
    if unknown:
        raise ValueError(f"{client.name}: n/a for unknown capabilities {sorted(unknown)}")


@dataclass
class Outcome:
    client: str
    capability: str
    status: str
    detail: str = ""
    duration_s: float = 0.0

    def key(self) -> str:
        return f"{self.client}/{self.capability}"

    def as_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "capability": self.capability,
            "status": self.status,
            "detail": self.detail,
            "duration_s": round(self.duration_s, 2),
        }
