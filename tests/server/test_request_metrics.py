"""The per-request series kept on the loop render exactly as prometheus_client's own objects would."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from rivven_kproto.server.metrics import LATENCY_BUCKETS, PHASE_BUCKETS, BrokerMetrics, api_name


def reference(observations: list[tuple[int, int, float]]) -> bytes:
    """The same series as prometheus_client's Counter and Histogram (what the broker used before)."""
    r = CollectorRegistry(auto_describe=False)
    requests = Counter("rivven_requests", "Requests handled, by API.", ["api"], registry=r)
    by_version = Counter("rivven_requests_by_version", "Requests handled, by API and version.", ["api", "version"],
                         registry=r)
    durations = Histogram(
        "rivven_request_duration_seconds", "Time from a decoded request to its encoded response, by API and "
        "version (handling, including waits for data, group members or an fsync).", ["api", "version"],
        buckets=LATENCY_BUCKETS, registry=r)
    queued = Histogram(
        "rivven_request_queue_seconds", "Time from a complete request frame to the decoded request, by API "
        "(decoding, and waiting for a worker thread when it is decoded off the event loop).", ["api"],
        buckets=PHASE_BUCKETS, registry=r)
    sent = Histogram(
        "rivven_response_send_seconds", "Time to hand an encoded response to the connection, by API "
        "(longer when the client reads slowly).", ["api"], buckets=PHASE_BUCKETS, registry=r)
    for api_key, version, seconds in observations:
        api = api_name(api_key)
        queued.labels(api).observe(seconds / 3)
        requests.labels(api).inc()
        by_version.labels(api, str(version)).inc()
        durations.labels(api, str(version)).observe(seconds)
        sent.labels(api).observe(seconds / 7)
    return generate_latest(r)


def test_the_request_series_render_as_prometheus_clients_objects() -> None:
    rng = random.Random(7)
    bounds = [*LATENCY_BUCKETS, *PHASE_BUCKETS]
    observations = [
        (rng.choice([0, 1, 3, 18, 26]), rng.choice([3, 9]),
         rng.choice([*bounds, rng.random() * 0.01, rng.random() * 60]))  # on a bound, between, above all
        for _ in range(3000)
    ]
    metrics = BrokerMetrics()
    for api_key, version, seconds in observations:
        metrics.observe_queue(api_key, seconds / 3)
        metrics.observe_request(api_key, seconds, None, version)
        metrics.observe_send(api_key, seconds / 7)
    families = ("rivven_requests_", "rivven_requests ", "rivven_request_duration_seconds", "rivven_request_queue_seconds",
                "rivven_response_send_seconds")

    def lines(exposition: bytes) -> set[str]:
        return {line for line in exposition.decode().splitlines()
                if any(line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(f) for f in families)}

    wanted = lines(reference(observations))
    assert len(wanted) > 200 and lines(metrics.exposition()) == wanted
