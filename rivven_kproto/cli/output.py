"""What every admin verb shares: global settings, running the client, rendering, failing in one line.

Results are rendered as rich tables for people or, with ``--format json``, as JSON with sorted
keys for scripts (streams such as ``consume`` and ``log dump`` write one JSON object per line).
Failures never show a traceback: a client error becomes ``error: <KAFKA_ERROR_NAME>: <why>`` on
stderr and exit status 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import trio
from rich.console import Console, RenderableType
from rich.table import Table

from rivven_kproto.client import ClientError, KafkaClient
from rivven_kproto.client.security import ClientSecurity, from_properties

T = TypeVar("T")

FORMATS = ("table", "json")


@dataclass
class Settings:
    """The group's options, handed to every verb through the click context."""

    bootstrap: str
    output: str
    timeout: float
    command_config: Path | None = None  # Kafka client properties: TLS and SASL settings

    @property
    def json(self) -> bool:
        return self.output == "json"


def settings() -> Settings:
    ctx = click.get_current_context()
    found = ctx.find_object(Settings)
    if found is None:  # only when a verb is invoked without the group (tests)
        found = Settings("localhost:9092", "table", 30.0)
    return found


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def fail(name: str, message: str) -> NoReturn:
    """Print the one-line error and exit 1 (the operation failed)."""
    click.echo(f"error: {name}: {one_line(message)}", err=True)
    sys.exit(1)


def client_security(options: Settings) -> ClientSecurity | None:
    """TLS/SASL settings from ``--command-config`` (Kafka's client properties file)."""
    if options.command_config is None:
        return None
    # The broker's config module, imported only when asked: every verb's start-up pays for it otherwise.
    from rivven_kproto.broker.config import ConfigError, read_properties

    try:
        return from_properties(read_properties(options.command_config))
    except (ValueError, ConfigError, OSError) as exc:
        raise click.BadParameter(str(exc), param_hint="'--command-config'") from None


def run(operation: Callable[[KafkaClient], Awaitable[T]]) -> T:
    """Run ``operation`` with a connected client under trio; client errors end the command."""
    options = settings()

    async def main() -> T:
        try:
            client = KafkaClient(options.bootstrap, timeout=options.timeout, security=client_security(options))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--bootstrap'") from None
        async with client:
            return await operation(client)

    try:
        return trio.run(main)
    except ClientError as exc:
        fail(exc.name, exc.message)


def text(data: bytes | None) -> str | None:
    """Bytes as text for output; undecodable bytes stay visible as escapes."""
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def emit_json(data: Any, *, lines: bool = False) -> None:
    """A JSON document (indented) or, for streams, one compact object per line."""
    if lines:
        click.echo(json.dumps(data, sort_keys=True, separators=(",", ":")))
    else:
        click.echo(json.dumps(data, sort_keys=True, indent=2))


def console() -> Console:
    # Wide enough that tables are not squeezed when stdout is a pipe (rich then assumes 80).
    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)


def error_console() -> Console:
    return Console(stderr=True, width=None if sys.stderr.isatty() else 160, highlight=False)


def emit(data: Any, render: Callable[[], RenderableType | list[RenderableType]]) -> None:
    """JSON with ``--format json``, else the rich rendering."""
    if settings().json:
        emit_json(data)
        return
    rendered = render()
    out = console()
    for item in rendered if isinstance(rendered, list) else [rendered]:
        out.print(item)


def table(title: str | None, columns: list[str], rows: list[list[Any]], wrap: tuple[str, ...] = ()) -> Table | str:
    """A table whose cells are never wrapped (ids stay whole) except in the ``wrap`` columns, which
    wrap at spaces; one line when it is empty.

    Each unwrapped column is at least as wide as its header and longest cell: rich otherwise
    shrinks columns to fit a wide one, down to zero width (#41: release names were invisible).
    """
    if not rows:
        return f"{title}: none" if title else "none"
    cells = [["n/a" if cell is None else str(cell) for cell in row] for row in rows]
    result = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        if column in wrap:
            result.add_column(column, overflow="fold")
        else:
            widest = max([len(column), *(len(row[index]) for row in cells if index < len(row))])
            result.add_column(column, no_wrap=True, overflow="ignore", min_width=widest)
    for row in cells:
        result.add_row(*row)
    return result


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 record``, ``2 records`` (``many`` for irregular plurals)."""
    return f"{count} {noun}" if count == 1 else f"{count} {many or noun + 's'}"


def parse_assignments(values: tuple[str, ...] | list[str], what: str) -> dict[str, str]:
    """``key=value`` strings into a dict; a usage error (exit 2) for anything else."""
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=what)
        result[key] = value
    return result
