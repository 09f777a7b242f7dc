"""The PromQL subset that renders the dashboard: parsing every panel, and Prometheus's arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tools.grafana.promql import Scrape, cap_windows, evaluate, histogram_quantile, parse

DASHBOARD = Path(__file__).parents[2] / "tools" / "grafana" / "rivven_kproto.json"


def labels(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())


def scrapes() -> list[Scrape]:
    """Three scrapes 10 s apart: a counter on two topics, a gauge, and a histogram."""
    def at(seconds: float, a: float, b: float, buckets: tuple[float, float, float]) -> Scrape:
        samples = {
            ("appended_total", labels(topic="a", partition="0")): a,
            ("appended_total", labels(topic="a", partition="1")): a / 2,
            ("appended_total", labels(topic="b", partition="0")): b,
            ("active", labels()): seconds,
        }
        for le, count in zip(("0.1", "1.0", "+Inf"), buckets, strict=True):
            samples[("latency_bucket", labels(api="Fetch", le=le))] = count
        return Scrape(seconds, samples)

    return [at(0, 0, 0, (0, 0, 0)), at(10, 100, 30, (50, 90, 100)), at(20, 300, 30, (100, 180, 200))]


def test_every_dashboard_expression_parses() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    for target in (t for p in panels for t in p["targets"]):
        assert parse(target["expr"])


def test_rate_sum_and_max_as_prometheus_computes_them() -> None:
    data = scrapes()
    assert evaluate("active", data, 2) == {labels(): 20}
    rate = evaluate("rate(appended_total[10s])", data, 2)
    assert rate[labels(topic="a", partition="0")] == 20 and rate[labels(topic="b", partition="0")] == 0
    assert evaluate("sum by (topic) (rate(appended_total[1m]))", data, 1) == {
        labels(topic="a"): 15.0, labels(topic="b"): 3.0}
    assert evaluate("max by (topic) (appended_total)", data, 2) == {labels(topic="a"): 300, labels(topic="b"): 30}
    assert evaluate("rate(appended_total[1m])", data, 0) == {}  # one scrape: no rate yet


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    # 50 of 100 at or below 0.1, 90 at or below 1.0: the median is the top of the first bucket,
    # p70 lies halfway through the second, p95 in +Inf answers the highest finite bound.
    buckets = [(0.1, 50.0), (1.0, 90.0), (math.inf, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.55)
    assert histogram_quantile(0.95, buckets) == 1.0
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.05)
    assert math.isnan(histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))
    value = evaluate("histogram_quantile(0.7, sum by (le, api) (rate(latency_bucket[10s])))", scrapes(), 2)
    assert value == {labels(api="Fetch"): pytest.approx(0.55)}


def test_windows_can_be_capped_and_unknown_syntax_is_refused() -> None:
    assert cap_windows("rate(x[5m])", 10) == "rate(x[10s])"
    assert cap_windows("rate(x[3s])", 10) == "rate(x[3s])"
    for bad in ("avg(x)", "rate(x)", "x + y", "sum by (a) x"):
        with pytest.raises((ValueError, IndexError)):
            evaluate(bad, scrapes(), 1)
