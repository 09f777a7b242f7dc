"""pytest plugin (entry point ``pytest11``): Kafka fixtures backed by an embedded rivven_kproto broker.

Fixtures:

* ``kafka_broker`` (session): the running broker (``.bootstrap``); with pytest-xdist each worker
  process gets its own.
* ``kafka_bootstrap`` (session): its ``host:port``.
* ``kafka_topic``: a fresh topic per test; ``@pytest.mark.kafka_topic(partitions=3,
  config={"retention.ms": "-1"})`` sets it up.
* ``kafka_admin``: a confluent-kafka ``AdminClient`` on the broker (skips if confluent-kafka is
  not installed).
* ``postgres_server`` (session): a throwaway PostgreSQL server (``testing.postgres``; skips when
  PostgreSQL is not installed), and ``postgres_url``: a fresh database on it per test, the URL
  ``kproto serve --storage`` takes.

``pytest --kafka-bootstrap HOST:PORT`` runs the same tests against an external cluster instead.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


class ExternalBroker:
    """Stands in for the embedded broker when ``--kafka-bootstrap`` names a cluster."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rivven_kproto", "Kafka fixtures (rivven_kproto)")
    group.addoption(
        "--kafka-bootstrap",
        metavar="HOST:PORT",
        default=None,
        help="use this Kafka cluster for the kafka_* fixtures instead of an embedded rivven_kproto broker",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_topic(partitions=1, config=None): how the kafka_topic fixture creates the test's topic"
    )


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    external = request.config.getoption("--kafka-bootstrap")
    if external:
        yield ExternalBroker(external)
        return
    from rivven_kproto.testing import EmbeddedBroker

    embedded = EmbeddedBroker(tmp_path_factory.mktemp("kafka-broker"), fsync="never").start()
    try:
        yield embedded
    finally:
        embedded.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: Any) -> str:
    return str(kafka_broker.bootstrap)


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest, kafka_bootstrap: str) -> str:
    """A topic no other test uses, created before the test (named after it, for broker logs)."""
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker is not None else {}
    partitions = int(options.get("partitions", 1))
    config = {str(k): str(v) for k, v in (options.get("config") or {}).items()}
    name = f"{re.sub(r'[^A-Za-z0-9._-]', '-', request.node.name)[:60]}-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_bootstrap, name, partitions, config)
    return name


@pytest.fixture
def kafka_admin(kafka_bootstrap: str) -> Any:
    admin = pytest.importorskip("confluent_kafka.admin")
    return admin.AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    from rivven_kproto.testing.postgres import find_bin_dir, temporary_postgres

    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    with temporary_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    from rivven_kproto.testing.postgres import create_database

    return create_database(postgres_server)


def _create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str]) -> None:
    """CreateTopics through the project's own client: works against any Kafka, needs no client library."""
    import trio

    from rivven_kproto.client.admin import create_topic
    from rivven_kproto.client.client import KafkaClient

    async def create() -> None:
        async with KafkaClient(bootstrap) as client:
            await create_topic(client, name, partitions, -1, config)

    trio.run(create)
