"""Issue #40's goals as ``python -m tools.bench`` judges them, on made-up rounds."""

from __future__ import annotations

from typing import Any

from tools.bench import report


def _round(consume: float, txn_cpu: float, txn_p99: float, txn_rate: float, busy_rate: float) -> dict[str, Any]:
    return {
        "consume-committed": {"msgs_per_s": consume, "messages": 500_000},
        "transactions": {"msgs_per_s": txn_rate * 10, "txn_per_s": txn_rate, "transactions": 2000,
                         "broker_cpu_s": txn_cpu, "p99_ms": txn_p99},
        "transactions-16p": {"msgs_per_s": txn_rate * 30, "txn_per_s": txn_rate * 3, "messages": 20_000,
                             "broker_cpu_s": txn_cpu, "p99_ms": txn_p99},
        "produce-8p": {"msgs_per_s": 500_000.0},
        "produce-8p-contended": {"msgs_per_s": busy_rate},
        "idle": {"rss_mib": 50.0},
    }


def _goals(ours: list[dict[str, Any]], peer: list[dict[str, Any]], null: list[dict[str, Any]]) -> dict[str, bool | None]:
    results = {report.OURS: ours, "tansu": peer, report.NULL: null}
    summary = report.summarize(results, "tansu")
    return {goal: met for goal, _, met in report.round_three_goals(summary, results, "tansu")}


def test_goals_met_when_ours_leads() -> None:
    ours = [_round(1_200_000, 1.0, 2.0, 600, 480_000), _round(1_100_000, 1.0, 2.0, 600, 470_000)]
    peer = [_round(900_000, 1.5, 3.0, 390, 500_000)] * 2
    null = [_round(1_150_000, 0.5, 1.0, 610, 500_000)] * 2
    goals = _goals(ours, peer, null)
    assert goals and all(goals.values()), goals
    assert "#40 transactions-16p: >= 1.5x the peer" in goals


def test_each_goal_missed_on_its_own_figure() -> None:
    peer = [_round(900_000, 1.0, 2.0, 600, 500_000)] * 2
    null = [_round(1_150_000, 0.5, 1.0, 610, 500_000)] * 2
    ours = [_round(300_000, 2.0, 4.0, 400, 300_000)] * 2
    goals = _goals(ours, peer, null)
    missed = {goal for goal, met in goals.items() if met is False}
    assert "#40 consume-committed: >= 0.9x the null broker (median of the rounds' ratios)" in missed
    assert "#40 consume-committed: best round >= 1.0x the peer's best round" in missed
    assert "#40 consume-committed: >= 1,000,000 msg/s (median)" in missed
    assert "#40 transactions: broker CPU per transaction <= 1.0x the peer's" in missed
    assert "#40 transactions-16p: broker CPU per transaction <= 1.0x the peer's" in missed
    assert "#40 transactions: commit p99 <= the peer's" in missed
    assert "#40 transactions: >= 0.95x the null broker" in missed
    assert "#40 transactions-16p: >= 0.85x the null broker" in missed
    assert "#40 produce-8p-contended: keeps >= 0.9 of its calm rate" in missed


def test_postgresql_goals_are_shares_of_the_native_log() -> None:
    native = [{"transactions": {"msgs_per_s": 4000.0, "txn_per_s": 400.0, "p99_ms": 3.0}, "idle": {"rss_mib": 50.0}}] * 3
    slow = [{"transactions": {"msgs_per_s": 1000.0, "txn_per_s": 100.0, "p99_ms": 12.0}, "idle": {"rss_mib": 50.0}}] * 3
    fast = [{"transactions": {"msgs_per_s": 3000.0, "txn_per_s": 300.0, "p99_ms": 5.0}, "idle": {"rss_mib": 50.0}}] * 3
    for pg, met in ((slow, False), (fast, True)):
        results = {report.OURS: native, report.PG_PEER: pg}
        goals = report.goals(report.summarize(results, report.PG_PEER), report.PG_PEER, results)
        assert [ok for _, _, ok in goals] == [met, met], goals
        assert goals[0][1] == ("0.25x" if not met else "0.75x")
