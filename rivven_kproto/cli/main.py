"""The ``kproto`` command. ``kproto serve`` runs the broker; admin verbs arrive with the CLI issue."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

import click
import trio

from rivven_kproto.broker.config import FSYNC_POLICIES, BrokerConfig, ConfigError, load_config


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """rivven_kproto: a Kafka-compatible broker written in Python."""


@main.command()
@click.option("--listen", metavar="HOST:PORT", help="Address to listen on (default 127.0.0.1:9092; port 0 = any free port).")
@click.option("--advertised-listener", metavar="HOST:PORT", help="Address clients are told to connect to (default localhost:<port>).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Data directory (default ./kproto-data).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="server.properties-style file.")
@click.option("--fsync", type=click.Choice(FSYNC_POLICIES), help="When to fsync (default interval).")
@click.option("--log-level", default="INFO", show_default=True, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def serve(
    listen: str | None,
    advertised_listener: str | None,
    data_dir: Path | None,
    config_file: Path | None,
    fsync: str | None,
    log_level: str,
) -> None:
    """Start the broker.

    Example: kproto serve --listen 127.0.0.1:0 --data-dir /tmp/kproto
    """
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    flags = {
        "listen": listen,
        "advertised.listener": advertised_listener,
        "data.dir": str(data_dir) if data_dir else None,
        "fsync": fsync,
    }
    try:
        config = load_config(config_file, os.environ, flags)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        trio.run(_serve_until_signalled, config)
    except OSError as exc:
        click.echo(f"kproto: cannot start the broker: {exc.strerror or exc}", err=True)
        sys.exit(1)


async def _serve_until_signalled(config: BrokerConfig) -> None:
    from rivven_kproto.server.app import serve as serve_broker

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_broker, config)
            async for signum in signals:
                logging.getLogger("rivven_kproto").info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
