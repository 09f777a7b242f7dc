"""The rule that suspends a broker whose heartbeat may have expired (broker/claims.py), on an injected clock."""

from __future__ import annotations

from rivven_kproto.broker.claims import ClaimsLease, safe_bound

SESSION_S, INTERVAL_S = 9.0, 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease(clock: Clock) -> ClaimsLease:
    return ClaimsLease(SESSION_S, INTERVAL_S, clock)


def test_the_bound_is_below_the_session_timeout_by_an_interval_and_a_margin() -> None:
    assert safe_bound(SESSION_S, INTERVAL_S) == 7.0
    assert safe_bound(SESSION_S, INTERVAL_S) < SESSION_S
    assert safe_bound(2.0, 1.0) == 1.0  # never below an interval: healthy brokers are not suspended between beats


def test_claims_hold_until_the_bound_after_the_last_confirmation() -> None:
    clock = Clock()
    claims = lease(clock)
    clock.now += 6.9
    assert claims.refresh() and claims.valid and not claims.lapsed()
    clock.now += 0.1
    assert not claims.refresh() and not claims.valid and claims.lapsed()


def test_the_flag_changes_only_when_refreshed() -> None:
    """Per-partition checks read the flag: one clock reading per request."""
    clock = Clock()
    claims = lease(clock)
    clock.now += 60
    assert claims.valid  # not read yet
    assert not claims.refresh()
    claims.confirm(clock.now)
    assert not claims.valid  # until the next request reads the clock
    assert claims.refresh()


def test_a_heartbeat_confirms_the_time_it_started_not_the_time_it_ended() -> None:
    """A heartbeat a pause fell into says nothing about the pause: the broker stays suspended."""
    clock = Clock()
    claims = lease(clock)
    started = clock.now + 0.5
    clock.now += 20.0  # the heartbeat's round trip was paused
    claims.confirm(started)
    assert not claims.refresh() and claims.lapsed()
    started = clock.now  # the next heartbeat, after the pause
    clock.now += 0.2
    claims.confirm(started)
    assert claims.refresh() and not claims.lapsed()


def test_a_confirmation_never_goes_back_in_time() -> None:
    clock = Clock()
    claims = lease(clock)
    claims.confirm(clock.now + 5)
    claims.confirm(clock.now + 1)  # a slower, earlier heartbeat finishing late
    assert claims.confirmed_at == clock.now + 5


def test_a_broker_alone_is_never_suspended() -> None:
    claims = ClaimsLease.alone()
    claims.confirmed_at -= 3600
    assert claims.refresh() and not claims.lapsed()


def test_after_a_lapse_the_claims_are_checked_at_every_heartbeat_for_a_session_timeout() -> None:
    """A broker that saw this one dead may claim a partition after the first check (late follow step)."""
    clock = Clock()
    claims = lease(clock)
    clock.now += 1.0
    assert not claims.must_check()  # healthy: no query
    clock.now += 10.0
    assert claims.must_check()  # lapsed
    claims.confirm(clock.now)
    for _ in range(8):
        clock.now += 1.0
        assert claims.must_check()
        claims.confirm(clock.now)
    clock.now += 1.5
    assert not claims.must_check()  # a session timeout after the lapse
