"""``kproto cluster info``: cluster id, brokers, controller and the API versions in use."""

from __future__ import annotations

import click

from rivven_kproto.client import admin

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
    """Cluster id, brokers, controller and, per API, the versions both sides speak.

    \b
    Example:
      kproto --format json cluster info
    """
    result = run(admin.cluster_info)
    data = {
        "cluster_id": result.cluster_id,
        "controller_id": result.controller_id,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in result.brokers
        ],
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
    }
    emit(
        data,
        lambda: [
            table(None, ["cluster id", "controller"], [[result.cluster_id, result.controller_id]]),
            table("brokers", ["node", "host", "port", "rack"], [[b.node_id, b.host, b.port, b.rack or "-"] for b in result.brokers]),
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
        ],
    )
