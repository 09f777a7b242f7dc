"""``kproto users add|remove|list``: SCRAM credentials, online through a running broker (KIP-554,
as ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]' --entity-type users``), or offline
with ``--data-dir`` before a broker starts on the directory (like ``kafka-storage format
--add-scram``). Only salted keys are stored (online, the password is salted here and never sent);
the password comes from a prompt on a terminal, else the first line of stdin."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rivven_kproto.broker.datadir_lock import DataDirLock, DataDirLocked
from rivven_kproto.broker.file_modes import make_private_dir
from rivven_kproto.broker.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramStore,
    make_credential,
)
from rivven_kproto.client import KafkaClient
from rivven_kproto.client import scram_users as online

from .output import emit, run, table

DATA_DIR = click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Work offline on this broker data directory (no broker may be running on it); "
         "without it, the broker at --bootstrap is asked.",
)
MECHANISM = click.option("--mechanism", type=click.Choice(MECHANISMS), default="SCRAM-SHA-256", show_default=True)


@click.group()
def users() -> None:
    """SCRAM users: online through the broker, or offline in a data directory (--data-dir)."""


def _store(data_dir: Path) -> tuple[ScramStore, DataDirLock]:
    make_private_dir(data_dir)
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirLocked as exc:
        raise click.ClickException(f"{exc}; stop the broker first, or leave out --data-dir to go through it") from None
    return ScramStore(data_dir / "meta"), lock


def _read_password(name: str) -> str:
    if sys.stdin.isatty():
        password: str = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise click.UsageError("the password is empty")
    return password


@users.command("add")
@click.argument("name")
@MECHANISM
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS), default=DEFAULT_ITERATIONS, show_default=True)
@DATA_DIR
def add(name: str, mechanism: str, iterations: int, data_dir: Path | None) -> None:
    """Add or replace a user's SCRAM credential.

    \\b
    Example:
      printf 'secret\\n' | kproto users add alice --mechanism SCRAM-SHA-512
      printf 'secret\\n' | kproto users add alice --data-dir ./kproto-data
    """
    password = _read_password(name)
    if data_dir is None:

        async def operation(client: KafkaClient) -> None:
            await online.upsert_user(client, name, mechanism, password, iterations)

        run(operation)
        click.echo(f"{mechanism} credential for {name} stored by the broker", err=True)
        return
    store, lock = _store(data_dir)
    try:
        store.upsert(mechanism, name, make_credential(mechanism, password, iterations))
    finally:
        lock.release()
    click.echo(f"{mechanism} credential for {name} stored in {store.path}", err=True)


@users.command("remove")
@click.argument("name")
@MECHANISM
@DATA_DIR
def remove(name: str, mechanism: str, data_dir: Path | None) -> None:
    """Remove a user's SCRAM credential (also spelled ``delete``).

    \\b
    Example:
      kproto users remove alice --mechanism SCRAM-SHA-512
    """
    if data_dir is None:

        async def operation(client: KafkaClient) -> None:
            await online.delete_user(client, name, mechanism)

        run(operation)
    else:
        store, lock = _store(data_dir)
        try:
            if not store.delete(mechanism, name):
                raise click.ClickException(f"RESOURCE_NOT_FOUND: no {mechanism} credential for {name}")
        finally:
            lock.release()
    click.echo(f"{mechanism} credential for {name} removed", err=True)


users.add_command(remove, "delete")


@users.command("list")
@DATA_DIR
def list_users(data_dir: Path | None) -> None:
    """Users, mechanisms and iterations (never keys).

    \\b
    Example:
      kproto users list
    """
    if data_dir is None:
        found = run(online.describe_users)
        rows = [[u.user, u.mechanism, u.iterations] for u in found]
    else:
        store = ScramStore(data_dir / "meta")
        rows = [[user, mechanism, iterations] for user, pairs in sorted(store.users().items()) for mechanism, iterations in pairs]
    data = [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows]
    emit(data, lambda: table(None, ["user", "mechanism", "iterations"], rows) if rows else "no SCRAM users")
