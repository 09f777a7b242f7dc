"""ApiVersions and share groups (KIP-932): the share-group APIs and the ``share.version`` feature
are advertised by default and disappear with ``group.share.enable=false``, as Kafka 4.2 decides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig, load_config
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import api_versions

NOW = 1_700_000_000_000
SHARE_APIS = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2)}


def answer(tmp_path: Path, config: BrokerConfig, version: int = 3) -> tuple[dict[int, tuple[int, int]], dict[str, int]]:
    broker = Broker(dataclasses.replace(config, data_dir=tmp_path / "data"), NOW)
    try:
        pinned = api_versions.handle(RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1"),
                                     ApiVersionsRequest(), version)
        response = ApiVersionsResponse.decode(pinned.encode(version), version)  # as a client sees it
    finally:
        broker.close()
    apis = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    return apis, {f.name: f.max_version_level for f in response.finalized_features}


def test_share_groups_are_advertised_by_default(tmp_path: Path) -> None:
    apis, finalized = answer(tmp_path, BrokerConfig())
    assert {key: apis[key] for key in SHARE_APIS} == SHARE_APIS
    assert finalized["share.version"] == 1


def test_group_share_enable_false_hides_them(tmp_path: Path) -> None:
    config = load_config(env={"KPROTO_GROUP_SHARE_ENABLE": "false"})
    apis, finalized = answer(tmp_path, config)
    assert not set(SHARE_APIS) & set(apis)
    assert "share.version" not in finalized
    assert finalized["transaction.version"] == 2


def test_rebalance_protocols_without_share_hide_them(tmp_path: Path) -> None:
    config = load_config(env={"KPROTO_GROUP_COORDINATOR_REBALANCE_PROTOCOLS": "classic,consumer"})
    apis, finalized = answer(tmp_path, config)
    assert not set(SHARE_APIS) & set(apis) and "share.version" not in finalized
