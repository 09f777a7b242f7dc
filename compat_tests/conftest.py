"""Fixtures: a real broker process per test module, on a free port and its own data directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base: Path = tmp_path_factory.mktemp("broker")
    process = BrokerProcess(base / "data", base / "broker.log").start()
    yield process
    if process.alive():
        assert process.stop() == 0, process.log_text()[-4000:]


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A fresh topic name per test, readable in broker logs."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"
