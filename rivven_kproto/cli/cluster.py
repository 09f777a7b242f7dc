"""``kproto cluster info``: cluster id, brokers, controller, coordinator shards and the API versions in use."""

from __future__ import annotations

import click

from rivven_kproto.broker.cluster import shard_of
from rivven_kproto.client import admin
from rivven_kproto.client.client import KafkaClient
from rivven_kproto.client.coordinator import KeyType, coordinators
from rivven_kproto.client.release_match import ReleaseMatch, match_releases

from .output import emit, run, table


@click.group()
def cluster() -> None:
    """Inspect the cluster.

    \b
    Example:
      kproto cluster info
    """


@cluster.command()
def info() -> None:
    """Cluster id, the live brokers (with the partitions each leads, which one is the controller,
    and the coordinator shards each coordinates: a group or transactional id is coordinated by the
    broker holding its shard; a shared PostgreSQL store has several, the native log one),
    finalized features (``transaction.version`` 2: transactions V2), per API the versions both
    sides speak, and which Kafka
    release's protocol the broker's table corresponds to (3.9 or 4.2: per release, the APIs at its
    newest version, behind it or missing, and beyond it).

    \b
    Example:
      kproto --format json cluster info
    """
    result, shards = run(_info_and_shards)
    by_node: dict[int, list[int]] = {}
    for shard, owner in sorted(shards.items()):
        if owner is not None:
            by_node.setdefault(owner, []).append(shard)
    releases = match_releases({a.api_key: a.broker_max for a in result.apis})
    data = {
        "cluster_id": result.cluster_id,
        "controller_id": result.controller_id,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
             "partitions_led": result.led.get(b.node_id, 0), "controller": b.node_id == result.controller_id,
             "coordinator_shards": by_node.get(b.node_id, [])}
            for b in result.brokers
        ],
        "coordinator_shards": len(shards),
        "coordinator_shards_unheld": sorted(shard for shard, owner in shards.items() if owner is None),
        "api_versions": [
            {
                "api_key": a.api_key,
                "name": a.name,
                "broker_min": a.broker_min,
                "broker_max": a.broker_max,
                "client_min": a.client_min,
                "client_max": a.client_max,
                "negotiated": a.negotiated,
            }
            for a in result.apis
        ],
        "features": result.features,
        "kafka_release": releases[0].release,
        "kafka_releases": [_release_json(match) for match in releases],
    }
    emit(
        data,
        lambda: [
            table(None, ["cluster id", "controller"], [[result.cluster_id, result.controller_id]]),
            table("brokers", ["node", "host", "port", "rack", "leads", "role", "coordinator shards"], [
                [b.node_id, b.host, b.port, b.rack or "-", result.led.get(b.node_id, 0),
                 "controller" if b.node_id == result.controller_id else "-",
                 " ".join(map(str, by_node.get(b.node_id, []))) or "-"]
                for b in result.brokers]),
            table("finalized features (KIP-584)", ["feature", "level"], [[k, v] for k, v in result.features.items()]),
            table(
                "API versions",
                ["key", "API", "broker", "client", "used"],
                [
                    [
                        a.api_key,
                        a.name,
                        f"{a.broker_min}-{a.broker_max}",
                        "-" if a.client_min is None else f"{a.client_min}-{a.client_max}",
                        "-" if a.negotiated is None else a.negotiated,
                    ]
                    for a in result.apis
                ],
            ),
            table(
                f"Kafka releases (the broker's table corresponds to {releases[0].release})",
                ["release", "at its newest", "behind or missing", "beyond", "behind (key: ours/its)"],
                [
                    [
                        m.release, len(m.same), len(m.behind), len(m.beyond),
                        " ".join(f"{k}:{'-' if ours is None else ours}/{its}" for k, (ours, its) in m.behind.items()) or "-",
                    ]
                    for m in releases
                ],
                wrap=("behind (key: ours/its)",),
            ),
        ],
    )


async def _info_and_shards(client: KafkaClient) -> tuple[admin.ClusterInfo, dict[int, int | None]]:
    """The cluster's description, and per coordinator shard the node holding it (None: nobody
    now): the shard count from the broker config ``coordinator.shards``, then one batched
    FindCoordinator for a key of each shard."""
    result = await admin.cluster_info(client)
    node = str(result.brokers[0].node_id) if result.brokers else "0"
    entries = await admin.describe_configs(client, admin.ResourceType.BROKER, node, ["coordinator.shards"])
    count = next((int(e.value) for e in entries if e.name == "coordinator.shards" and e.value), 1)
    probes: dict[int, str] = {}
    n = 0
    while len(probes) < count:  # a key hashing to each shard (a few per shard on average)
        key = f"kproto-shard-probe-{n}"
        probes.setdefault(shard_of(key, count), key)
        n += 1
    owners = await coordinators(client, KeyType.GROUP, [probes[shard] for shard in range(count)])
    return result, {shard: owners.get(probes[shard]) for shard in range(count)}


def _release_json(match: ReleaseMatch) -> dict[str, object]:
    return {
        "release": match.release,
        "same": match.same,
        "behind": [{"api_key": k, "broker_max": ours, "release_max": its} for k, (ours, its) in match.behind.items()],
        "beyond": [{"api_key": k, "broker_max": ours, "release_max": its} for k, (ours, its) in match.beyond.items()],
    }


@cluster.command()
@click.option("--storage", required=True, envvar="KPROTO_STORAGE", metavar="postgresql://USER[:PW]@HOST[:PORT]/DB",
              help="The database the brokers share (also KPROTO_STORAGE).")
def members(storage: str) -> None:
    """Brokers registered in a shared PostgreSQL store: node id, advertised address, role
    (coordinator: serving and holding the coordinator lease; serving; or standby waiting to take
    over), age of the last heartbeat, and whether it is live
    (a heartbeat within the 9 s session timeout). Read from the database, so it also shows
    brokers that do not serve clients.

    \b
    Example:
      kproto cluster members --storage postgresql://kproto@db.example/kproto
    """
    import psycopg

    from rivven_kproto.broker.storage.postgres.registry import members as registered

    try:
        with psycopg.connect(storage, connect_timeout=10) as conn:
            found = registered(conn)
    except psycopg.errors.UndefinedTable:
        found = []  # no broker has opened this database yet
    except psycopg.Error as exc:
        raise click.ClickException(f"cannot read the registry: {str(exc).strip().splitlines()[0]}") from None
    data = [
        {"node_id": m.node_id, "host": m.host, "port": m.port, "role": m.role, "live": m.live,
         "heartbeat_age_s": round(m.heartbeat_age_s, 1), "started_at": m.started_at.isoformat()}
        for m in found
    ]
    emit(data, lambda: table("brokers", ["node", "host", "port", "role", "live", "heartbeat", "started"], [
        [m.node_id, m.host, m.port, m.role, "yes" if m.live else "no", f"{m.heartbeat_age_s:.1f} s ago",
         m.started_at.strftime("%Y-%m-%d %H:%M:%S %Z")] for m in found]))
