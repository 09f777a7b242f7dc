"""The per-request series, kept as plain numbers on the event loop and exposed by a collector.

Every request updates five series: requests by API and by API and version, the duration by API and
version, and the queue and send phases by API. prometheus_client's Counter and Histogram take a
lock and walk the buckets in Python on every update (about a tenth of the broker's CPU for a small
request). These series are only updated on the event loop, and scrapes collect on the event loop
too, so plain integers serve; ``collect`` gives the same families (names, help, labels, buckets)
as the Counter and Histogram objects did.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class LoopHistogram:
    """Bucket counts (a value counts in the first bucket whose bound it does not exceed) and a sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            buckets.append((floatToGoString(bound), running))
        return buckets


class ApiSeries:
    """One API's requests and phases."""

    __slots__ = ("api", "queue_seconds", "requests", "send_seconds")

    def __init__(self, api: str, phase_buckets: tuple[float, ...]) -> None:
        self.api = api
        self.requests = 0
        self.queue_seconds = LoopHistogram(phase_buckets)
        self.send_seconds = LoopHistogram(phase_buckets)


class VersionSeries:
    """One (API, version)'s requests and durations."""

    __slots__ = ("duration_seconds", "requests")

    def __init__(self, latency_buckets: tuple[float, ...]) -> None:
        self.requests = 0
        self.duration_seconds = LoopHistogram(latency_buckets)


class RequestSeries(Collector):
    """The series by API key and version (what a request carries), named only when collected."""

    def __init__(
        self, latency_buckets: tuple[float, ...], phase_buckets: tuple[float, ...], name: Callable[[int], str]
    ) -> None:
        self.latency_buckets = latency_buckets
        self.phase_buckets = phase_buckets
        self.name = name  # an API key's label
        self.by_api: dict[int, ApiSeries] = {}
        self.by_version: dict[tuple[int, int], VersionSeries] = {}

    def api(self, api_key: int) -> ApiSeries:
        series = self.by_api.get(api_key)
        if series is None:
            series = self.by_api[api_key] = ApiSeries(self.name(api_key), self.phase_buckets)
        return series

    def version(self, api_key: int, version: int) -> VersionSeries:
        series = self.by_version.get((api_key, version))
        if series is None:
            series = self.by_version[api_key, version] = VersionSeries(self.latency_buckets)
        return series

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("rivven_requests", "Requests handled, by API.", labels=["api"])
        by_version = CounterMetricFamily("rivven_requests_by_version", "Requests handled, by API and version.",
                                         labels=["api", "version"])
        durations = HistogramMetricFamily(
            "rivven_request_duration_seconds", "Time from a decoded request to its encoded response, by API and "
            "version (handling, including waits for data, group members or an fsync).", labels=["api", "version"])
        queued = HistogramMetricFamily(
            "rivven_request_queue_seconds", "Time from a complete request frame to the decoded request, by API "
            "(decoding, and waiting for a worker thread when it is decoded off the event loop).", labels=["api"])
        sent = HistogramMetricFamily(
            "rivven_response_send_seconds", "Time to hand an encoded response to the connection, by API "
            "(longer when the client reads slowly).", labels=["api"])
        for series in self.by_api.values():
            requests.add_metric([series.api], series.requests)
            queued.add_metric([series.api], series.queue_seconds.cumulative(), series.queue_seconds.total)
            sent.add_metric([series.api], series.send_seconds.cumulative(), series.send_seconds.total)
        for (api_key, version), counts in self.by_version.items():
            labels = [self.name(api_key), str(version)]
            by_version.add_metric(labels, counts.requests)
            durations.add_metric(labels, counts.duration_seconds.cumulative(), counts.duration_seconds.total)
        yield from (requests, by_version, durations, queued, sent)
