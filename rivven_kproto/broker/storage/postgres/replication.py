"""What a commit acknowledged by PostgreSQL survives: read at start, warned about when it is less
than a failover needs.

A broker acknowledges a write once PostgreSQL committed it. That survives a crash of the server
with ``synchronous_commit`` on (or remote_write and above); it survives a failover to a standby only
when the standby is synchronous (``synchronous_standby_names`` names it and it is connected): with
an asynchronous standby, the newest commits the primary acknowledged may be missing on the
promoted server. The broker cannot fix that, but it can say so at start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

log = logging.getLogger(__name__)

# synchronous_commit values that wait for the local WAL flush at least (survive a server crash).
_LOCAL_DURABLE = frozenset({"on", "remote_apply", "remote_write", "local"})
# ... and those that also wait for a synchronous standby (survive a failover to it).
_STANDBY_DURABLE = frozenset({"on", "remote_apply", "remote_write"})


@dataclass(frozen=True)
class ReplicationSettings:
    synchronous_commit: str
    synchronous_standby_names: str
    synchronous_standbys_connected: int  # standbys in pg_stat_replication with sync_state sync/quorum
    in_recovery: bool = False


def read_settings(conn: psycopg.Connection) -> ReplicationSettings:
    row = conn.execute(
        "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),"
        " (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')), pg_is_in_recovery()"
    ).fetchone()
    assert row is not None
    return ReplicationSettings(str(row[0]), str(row[1]), int(row[2]), bool(row[3]))


def durability_warnings(settings: ReplicationSettings) -> list[str]:
    """What an acknowledgement does not survive with these settings (empty: a crash and a
    failover to a synchronous standby both keep it)."""
    commit = settings.synchronous_commit.lower()
    if commit not in _LOCAL_DURABLE:
        return [f"synchronous_commit is {commit}: a PostgreSQL crash may lose writes the brokers acknowledged "
                "(set it to on)"]
    if not settings.synchronous_standby_names.strip():
        return ["no synchronous standby (synchronous_standby_names is empty): a failover to a standby may lose "
                "writes the brokers acknowledged; a crash of this server alone loses nothing"]
    if commit not in _STANDBY_DURABLE:
        return [f"synchronous_commit is {commit}: commits do not wait for the synchronous standby, so a failover "
                "may lose writes the brokers acknowledged (set it to on)"]
    if settings.synchronous_standbys_connected == 0:
        return ["synchronous_standby_names is set but no synchronous standby is connected: commits (and every "
                "acknowledgement) wait until one is"]
    return []


def warn_about_durability(conn: psycopg.Connection) -> list[str]:
    """Log (at start) what acknowledgements do not survive on this database."""
    try:
        warnings = durability_warnings(read_settings(conn))
    except psycopg.Error as exc:
        log.warning("PostgreSQL: could not read the replication settings: %s", exc)
        return []
    for warning in warnings:
        log.warning("PostgreSQL: %s", warning)
    return warnings
