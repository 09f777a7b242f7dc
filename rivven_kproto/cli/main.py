"""The ``kproto`` command: ``serve`` runs the broker; the admin verbs talk to any Kafka-compatible broker.

Exit status: 0 success, 1 the operation failed (``error: <KAFKA_ERROR_NAME>: <why>`` on stderr),
2 a usage error (bad flag or argument), always as one line and never as a traceback.
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import trio

from .output import FORMATS, Settings, one_line

if TYPE_CHECKING:
    from rivven_kproto.broker.config import BrokerConfig

FSYNC_CHOICES = ("always", "interval", "never")  # broker.config.FSYNC_POLICIES (a unit test keeps them equal)

# The verbs, by the module defining each: a module is imported when its verb is used (or listed,
# for --help), so ``kproto produce`` does not start by importing the broker and every other verb
# (the bulk CLI's start-up was a third of kcat's whole run).
LAZY_COMMANDS = {
    "cluster": ("cluster", "cluster"),
    "topics": ("topics", "topics"),
    "configs": ("configs", "configs"),
    "produce": ("produce", "produce"),
    "consume": ("consume", "consume"),
    "log": ("logtools", "log"),
    "txns": ("txns", "txns"),
    "producers": ("txns", "producers"),
    "groups": ("groups", "groups"),
    "share-groups": ("share_groups", "share_groups"),
    "verify-eos": ("verify_eos", "verify_eos"),
    "users": ("users", "users"),
    "acls": ("acls", "acls"),
}

GLOBAL_VALUE_OPTIONS = ("--bootstrap", "--bootstrap-server", "-b", "--timeout", "--format", "--command-config")


def hoist_global_options(args: list[str]) -> list[str]:
    """Move global options given after the verb in front of it, as Kafka users type them.

    ``kproto topics list --format json`` then means ``kproto --format json topics list``.
    ``--format`` is global only with a value of ``table``/``json`` (else it is the verb's own
    option, e.g. a consume template); nothing after ``--`` moves.
    """
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest.extend(args[index:])
            break
        name, eq, value = arg.partition("=")
        if name in GLOBAL_VALUE_OPTIONS and rest:
            if not eq and index + 1 < len(args):
                value = args[index + 1]
            if name != "--format" or value in FORMATS:
                front.extend([name, value])
                index += 1 if eq else 2
                continue
        rest.append(arg)
        index += 1
    return front + rest


class KprotoGroup(click.Group):
    """click's group, with every error reported on one line instead of click's usage block."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            module, attribute = LAZY_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(f"{__package__}.{module}"), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        kwargs.setdefault("prog_name", "kproto")
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # a group without its verb: its help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"error: usage: {one_line(exc.format_message())}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            sys.exit(130)  # Ctrl-C: the usual way to stop a consumer, not an error worth a line
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=KprotoGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--bootstrap",
    "--bootstrap-server",
    "-b",
    "bootstrap",
    envvar="KPROTO_BOOTSTRAP",
    default="localhost:9092",
    show_default=True,
    metavar="HOST:PORT[,...]",
    help="Broker(s) to bootstrap from (env KPROTO_BOOTSTRAP; also spelled --bootstrap-server, -b).",
)
@click.option("--format", "output", type=click.Choice(FORMATS), default="table", show_default=True, help="Output for people (table) or scripts (json).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True, metavar="SECONDS", help="Give up on a request after this long.")
@click.option("--command-config", type=click.Path(dir_okay=False, path_type=Path), envvar="KPROTO_COMMAND_CONFIG",
              help="Kafka client properties for TLS/SASL (security.protocol, sasl.mechanism, sasl.username, ...).")
@click.version_option(package_name="rivven_kproto", prog_name="kproto", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, bootstrap: str, output: str, timeout: float, command_config: Path | None) -> None:
    """rivven_kproto: a Kafka-compatible broker written in Python, and admin tools for any Kafka cluster.

    \b
    Example:
      kproto --bootstrap localhost:9092 --format json topics list
    """
    ctx.obj = Settings(bootstrap, output, timeout, command_config)


@main.command()
@click.option("--listen", metavar="HOST:PORT", help="Address to listen on (default 127.0.0.1:9092; port 0 = any free port).")
@click.option("--advertised-listener", metavar="HOST:PORT", help="Address clients are told to connect to (default localhost:<port>).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Data directory of the native log (default ./kproto-data; ':memory:' for a throwaway one in RAM, removed at exit); unused with --storage postgresql://...")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="server.properties-style file.")
@click.option("--fsync", type=click.Choice(FSYNC_CHOICES), help="When to fsync (default interval).")
@click.option("--storage", metavar="URL", help="Where partitions and state live: the native log in --data-dir (default) or postgresql://USER@HOST[:PORT]/DB (the password from PGPASSWORD or PGPASSFILE, not the command line, which ps shows).")
@click.option("--standby", is_flag=True, default=None, help="With --storage postgresql://...: when another broker serves the database, wait and take over when it stops (instead of failing).")
@click.option("--node-id", type=click.IntRange(min=0), default=None, help="This broker's node id (default: 0 on the native log; on PostgreSQL the lowest id no other broker of the database holds).")
@click.option("--metrics", metavar="HOST:PORT", help="Serve /metrics (Prometheus), /healthz and /readyz here (default off).")
@click.option("--log-level", default="INFO", show_default=True, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
def serve(
    listen: str | None,
    advertised_listener: str | None,
    data_dir: Path | None,
    config_file: Path | None,
    fsync: str | None,
    storage: str | None,
    standby: bool | None,
    node_id: int | None,
    metrics: str | None,
    log_level: str,
) -> None:
    """Start the broker.

    Example: kproto serve --listen 127.0.0.1:0 --data-dir /tmp/kproto
    """
    from rivven_kproto.broker.config import ConfigError, load_config
    from rivven_kproto.broker.storage import StorageError

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    throwaway = None
    if data_dir is not None and str(data_dir) == ":memory:":
        from rivven_kproto.testing import memory_directory

        data_dir = throwaway = memory_directory()
        logging.getLogger("rivven_kproto").info("throwaway data directory %s (removed at exit)", throwaway)
    flags = {
        "listen": listen,
        "advertised.listener": advertised_listener,
        "data.dir": str(data_dir) if data_dir else None,
        "fsync": fsync,
        "storage": storage,
        "standby": "true" if standby else None,
        "node.id": str(node_id) if node_id is not None else None,
        "metrics": metrics,
    }
    try:
        config = load_config(config_file, os.environ, flags)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        trio.run(_serve_until_signalled, config)
    except BaseException as exc:
        storage_failure = _cause(exc, StorageError)
        if storage_failure is not None:
            click.echo(f"error: storage {_redacted(config.storage)}: {storage_failure}", err=True)
            sys.exit(1)
        failure = _cause(exc, OSError)
        if failure is None:
            raise
        click.echo(f"error: {_start_failure(failure, config)}", err=True)
        sys.exit(1)
    finally:
        if throwaway is not None:
            shutil.rmtree(throwaway, ignore_errors=True)


E = TypeVar("E", bound=BaseException)


def _cause(exc: BaseException, kind: type[E]) -> E | None:
    """The ``kind`` of failure that stopped start-up, also from inside trio's exception groups."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _cause(inner, kind)
            if found is not None:
                return found
    return None


def _redacted(url: str | None) -> str:
    """The storage URL without its password."""
    return re.sub(r"://([^:@/]+):[^@/]*@", r"://\1:***@", url or "native")


def _start_failure(exc: OSError, config: BrokerConfig) -> str:
    """One line for why the broker could not start (the traceback helps nobody here)."""
    address = f"{config.listen_host}:{config.listen_port}"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {address}: address already in use"
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
        return f"cannot listen on {address}: {os.strerror(exc.errno).lower()}"
    return f"cannot start the broker: {exc.strerror or exc}"


async def _serve_until_signalled(config: BrokerConfig) -> None:
    from rivven_kproto.server.app import serve as serve_broker

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                # Listened to from the start: a signal during recovery, or while a standby waits
                # for its database, stops the broker too.
                async for signum in signals:
                    logging.getLogger("rivven_kproto").info("received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(stop_on_signal)
            await serve_broker(config)
            nursery.cancel_scope.cancel()
