"""What the broker says at start about the durability PostgreSQL's settings give (#36)."""

from __future__ import annotations

from rivven_kproto.broker.storage.postgres.replication import ReplicationSettings, durability_warnings


def warnings(commit: str, names: str = "", connected: int = 0) -> list[str]:
    return durability_warnings(ReplicationSettings(commit, names, connected))


def test_a_synchronous_standby_with_synchronous_commit_on_gives_no_warning() -> None:
    assert warnings("on", "'*'", 1) == []
    assert warnings("remote_apply", "FIRST 1 (s1, s2)", 1) == []


def test_synchronous_commit_off_is_a_crash_risk() -> None:
    (warning,) = warnings("off", "'*'", 1)
    assert "synchronous_commit is off" in warning and "crash" in warning


def test_no_synchronous_standby_is_a_failover_risk() -> None:
    (warning,) = warnings("on", "")
    assert "no synchronous standby" in warning and "failover" in warning


def test_local_commits_do_not_wait_for_the_standby() -> None:
    (warning,) = warnings("local", "'*'", 1)
    assert "synchronous_commit is local" in warning and "failover" in warning


def test_a_named_standby_that_is_not_connected_stalls_commits() -> None:
    (warning,) = warnings("on", "'*'", 0)
    assert "no synchronous standby is connected" in warning
