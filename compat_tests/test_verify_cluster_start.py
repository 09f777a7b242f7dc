"""verify-eos --cluster starts its brokers on ports it probes free; another process can take such a
port before the broker binds it (other work runs on the machine). The broker then exits ("address
already in use") while the port answers, and the run used to wait out its 120 s for brokers that
never met (seed 15 of a 180 s series). Now that broker gets another port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from rivven_kproto.testing.postgres import find_bin_dir
from rivven_kproto.verify import cluster as cluster_module
from rivven_kproto.verify.cluster import Cluster, kill_leftovers


def test_a_broker_whose_port_was_taken_starts_on_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed")
    taken = socket.create_server(("127.0.0.1", 0))
    ports = iter([taken.getsockname()[1]])
    real = cluster_module._free_port
    monkeypatch.setattr(cluster_module, "_free_port", lambda: next(ports, None) or real())
    cluster = Cluster(tmp_path / "c", 1, postgres_bin=bin_dir)
    try:
        cluster.start()
        assert cluster.brokers[1].port != taken.getsockname()[1]
        assert cluster.live_nodes() == {1}
        assert "address already in use" in (tmp_path / "c" / "n1.log").read_text()
    finally:
        taken.close()
        cluster.close()
        kill_leftovers(tmp_path / "c")
        cluster.remove_database_dir()
