"""How a coordinator shard gets its share coordinator: kept out of ``broker/broker.py`` (which is
at the module-size limit) and free of it (``broker`` imports this, never the other way round)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .config import ShareConfig
from .coordinator import ShareCoordinator
from .leaders import LeaderShares


def share_log_name(shard: int, shard_count: int) -> str:
    """The shard's share coordinator log (``meta/share`` on the native log)."""
    return "share" if shard_count == 1 else f"share/{shard}"


def share_served(config: ShareConfig) -> bool:
    """Share groups are served: ``group.share.enable``, on either engine (on PostgreSQL the share
    coordinator's log is a coordinator log of the shard, like the group coordinator's)."""
    return config.enabled


def make_share_coordinator(
    config: ShareConfig,
    open_log: Callable[[str], Any],
    shard: int,
    shard_count: int,
    topic_view: Callable[[], Mapping[str, int]],
    other_kind: Callable[[str], bool],
    config_of: Callable[[str], ShareConfig] | None = None,
) -> ShareCoordinator:
    """The shard's share coordinator (KIP-932) on its own durable log, told the topics (for the
    assignor), which ids are classic or consumer groups (one id is one kind of group) and each
    group's settings (its group configs over ``config``)."""
    share = ShareCoordinator(config, open_log(share_log_name(shard, shard_count)))
    if config_of is not None:
        share.config_of = config_of
    share.topic_view = topic_view
    share.other_kind = other_kind
    return share


def make_leader_shares(config_of: Callable[[str], ShareConfig], config: ShareConfig, storage_url: str | None,
                       partition: Callable[[str, int], Any], open_log: Callable[[Any], Any]) -> LeaderShares | None:
    """On PostgreSQL, share partitions live with their partition's leader (``leaders.py``); on the
    native log (one broker) the group's share coordinator keeps them, as before."""
    if not config.enabled or storage_url is None:
        return None
    leaders = LeaderShares(config, partition, open_log)
    leaders.config_of = config_of
    return leaders
