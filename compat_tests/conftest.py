"""Fixtures: a real broker process per test module, on a free port and its own data directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .broker_process import BrokerProcess, module_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "broker")


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A fresh topic name per test, readable in broker logs."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"
