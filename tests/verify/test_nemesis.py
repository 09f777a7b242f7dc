"""The nemesis's schedule: the seed's alone (a replay meets the same faults), every kind forced once
early when asked, failover only with a standby."""

from __future__ import annotations

from rivven_kproto.verify.nemesis import COUNTERS, SESSION_TIMEOUT_S, Rates, Schedule, schedule_steps

STEPS = 400


def run(seed: int, rates: Rates, standby: bool = True) -> list[tuple[int, str, float, float]]:
    schedule = Schedule(rates, seed, rates.enabled(standby))
    return [(d.step, d.kind, d.choice, d.downtime_s) for _ in range(STEPS) for d in schedule.next()]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    rates = Rates(steps=STEPS)
    assert run(7, rates) == run(7, rates)
    assert run(7, rates) != run(8, rates)
    assert len(run(7, rates)) > 10  # the default chances give a fault every few steps


def test_every_kind_is_forced_once_in_the_first_third() -> None:
    rates = Rates(kill=0, pause=0, long_pause=0, cut=0, postgres_restart=0, failover=0, every_kind=True, steps=STEPS)
    rates_on = Rates(every_kind=True, steps=STEPS)
    for standby in (True, False):
        forced = Schedule(rates_on, 3, rates_on.enabled(standby)).forced
        kinds = sorted(kind for at in forced.values() for kind in at)
        assert kinds == sorted(k for k in COUNTERS if standby or k != "failover")
        assert all(1 <= step < STEPS // 3 for step in forced)
    assert run(3, rates) == []  # all chances zero: nothing is enabled, nothing forced


def test_long_pauses_outlast_the_session_and_failover_needs_a_standby() -> None:
    draws = run(11, Rates(long_pause=0.05, failover=0.05, steps=STEPS), standby=False)
    assert {kind for _, kind, _, _ in draws} >= {"kill", "pause", "long_pause", "cut", "postgres_restart"}
    assert "failover" not in {kind for _, kind, _, _ in draws}
    assert all(downtime > SESSION_TIMEOUT_S for _, kind, _, downtime in draws if kind == "long_pause")
    assert all(downtime < SESSION_TIMEOUT_S for _, kind, _, downtime in draws if kind != "long_pause")


def test_a_forced_fault_that_could_not_be_injected_comes_again_next_step() -> None:
    rates = Rates(kill=0, pause=0, long_pause=0.001, cut=0, postgres_restart=0, failover=0, every_kind=True, steps=30)
    schedule = Schedule(rates, 5, rates.enabled(False))
    forced = next(d for _ in range(30) for d in schedule.next() if d.forced)
    schedule.again(forced)
    assert [d.kind for d in schedule.next() if d.forced] == ["long_pause"]


def test_a_run_is_owed_only_the_kinds_that_never_happened() -> None:
    """--every-fault keeps a run going past its duration only until each enabled kind happened
    (a forced step drawn late in a long run must not keep it going for thousands of steps)."""
    from rivven_kproto.verify.history import History
    from rivven_kproto.verify.nemesis import Nemesis

    nemesis = Nemesis.__new__(Nemesis)  # the bookkeeping only: no cluster
    nemesis.rates = Rates(every_kind=True, steps=10_000)
    nemesis.schedule = Schedule(nemesis.rates, 1, ["kill", "cut"])
    nemesis.history = History(seed=1, bootstrap="")
    assert nemesis.owes_forced()
    nemesis.history.faults[COUNTERS["kill"]] = 1
    assert nemesis.owes_forced()
    nemesis.history.faults[COUNTERS["cut"]] = 2
    assert not nemesis.owes_forced() and nemesis.schedule.forced  # forced steps remain, none owed


def test_a_long_run_capped_by_its_duration_reaches_every_forced_fault() -> None:
    """180 s with a 5,000-transaction cap: the forced faults are drawn where such a run gets
    (about two steps a second), not among 10,000 steps it never reaches (seed 32 ran 900 s
    without its forced long pause)."""
    steps = schedule_steps(5000, 180.0)
    assert steps == 360
    rates = Rates(every_kind=True, steps=steps)
    for seed in range(50):
        schedule = Schedule(rates, seed, rates.enabled(True))
        assert max(schedule.forced) < steps // 3
    assert schedule_steps(30, 30.0) == 60 and schedule_steps(30, None) == 60
