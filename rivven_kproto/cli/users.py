"""``kproto users add|delete|list --data-dir DIR``: SCRAM credentials, offline, before a broker
starts on the directory (like ``kafka-storage format --add-scram``). Only the salted keys are
stored; the password comes from a prompt on a terminal, else the first line of stdin."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rivven_kproto.broker.datadir_lock import DataDirLock, DataDirLocked
from rivven_kproto.broker.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramStore,
    make_credential,
)

from .output import emit, table

DATA_DIR = click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("kproto-data"),
                        show_default=True, help="The broker's data directory (no broker may be running on it).")


@click.group()
def users() -> None:
    """SCRAM users of a broker's data directory (offline)."""


def _store(data_dir: Path) -> tuple[ScramStore, DataDirLock]:
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirLocked as exc:
        raise click.ClickException(f"{exc}; stop the broker first") from None
    return ScramStore(data_dir / "meta"), lock


@users.command("add")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(MECHANISMS), default="SCRAM-SHA-256", show_default=True)
@click.option("--iterations", type=click.IntRange(min=MIN_ITERATIONS), default=DEFAULT_ITERATIONS, show_default=True)
@DATA_DIR
def add(name: str, mechanism: str, iterations: int, data_dir: Path) -> None:
    """Add or replace a user's SCRAM credential.

    \\b
    Example:
      printf 'secret\\n' | kproto users add alice --mechanism SCRAM-SHA-512 --data-dir ./kproto-data
    """
    if sys.stdin.isatty():
        password = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise click.UsageError("the password is empty")
    store, lock = _store(data_dir)
    try:
        store.upsert(mechanism, name, make_credential(mechanism, password, iterations))
    finally:
        lock.release()
    click.echo(f"{mechanism} credential for {name} stored in {store.path}", err=True)


@users.command("delete")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(MECHANISMS), default="SCRAM-SHA-256", show_default=True)
@DATA_DIR
def delete(name: str, mechanism: str, data_dir: Path) -> None:
    """Remove a user's SCRAM credential."""
    store, lock = _store(data_dir)
    try:
        if not store.delete(mechanism, name):
            raise click.ClickException(f"RESOURCE_NOT_FOUND: no {mechanism} credential for {name}")
    finally:
        lock.release()


@users.command("list")
@DATA_DIR
def list_users(data_dir: Path) -> None:
    """Users and mechanisms (never keys)."""
    store = ScramStore(data_dir / "meta")
    rows = [[user, mechanism, c.iterations] for mechanism, found in sorted(store.credentials.items()) for user, c in sorted(found.items())]
    data = [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows]
    emit(data, lambda: table(None, ["user", "mechanism", "iterations"], rows) if rows else "no SCRAM users")
