"""The small part of PromQL the dashboard uses, evaluated over a series of /metrics scrapes.

Without a Prometheus server on these machines, ``render.py`` scrapes the broker itself and
evaluates each panel's expression here: selectors (a metric name), ``rate(m[w])``, ``sum``/``max``
with ``by (labels)``, and ``histogram_quantile(q, ...)`` with Prometheus's interpolation inside
the bucket. Anything else raises ``ValueError``, so a dashboard expression this cannot draw is
noticed, not drawn wrong.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]

_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d+)?)(?P<unit>[smh])?|(?P<name>[A-Za-z_:][\w:]*)|(?P<punct>[(),\[\]]))")
_SECONDS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Scrape:
    """One scrape: seconds since the first, and every sample as (name, labels) -> value."""

    at: float
    samples: dict[tuple[str, Labels], float]


def tokens(expr: str) -> list[str]:
    out, pos = [], 0
    while pos < len(expr.rstrip()):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise ValueError(f"cannot read {expr[pos:]!r}")
        out.append(match.group(0).strip())
        pos = match.end()
    return out


class _Parser:
    def __init__(self, expr: str) -> None:
        self.tokens = tokens(expr)
        self.pos = 0

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.pos]
        if expected is not None and token != expected:
            raise ValueError(f"expected {expected!r}, found {token!r}")
        self.pos += 1
        return token

    def expression(self) -> tuple:  # type: ignore[type-arg]
        head = self.take()
        if head == "rate":
            self.take("(")
            name = self.take()
            self.take("[")
            window = self.take()
            self.take("]")
            self.take(")")
            return ("rate", name, float(window[:-1]) * _SECONDS[window[-1]])
        if head == "histogram_quantile":
            self.take("(")
            quantile = float(self.take())
            self.take(",")
            inner = self.expression()
            self.take(")")
            return ("quantile", quantile, inner)
        if head in ("sum", "max"):
            by: tuple[str, ...] = ()
            if self.tokens[self.pos] == "by":
                self.take("by")
                self.take("(")
                names = []
                while (token := self.take()) != ")":
                    if token != ",":
                        names.append(token)
                by = tuple(names)
            self.take("(")
            inner = self.expression()
            self.take(")")
            return ("aggregate", head, by, inner)
        return ("selector", head)


def parse(expr: str) -> tuple:  # type: ignore[type-arg]
    parser = _Parser(expr)
    tree = parser.expression()
    if parser.pos != len(parser.tokens):
        raise ValueError(f"unexpected {parser.tokens[parser.pos]!r} in {expr!r}")
    return tree


def cap_windows(expr: str, seconds: float) -> str:
    """``expr`` with every range window shortened to at most ``seconds`` (for short runs)."""
    def cap(match: re.Match[str]) -> str:
        window = float(match.group(1)) * _SECONDS[match.group(2)]
        return f"[{min(window, seconds):g}s]"
    return re.sub(r"\[(\d+(?:\.\d+)?)([smh])\]", cap, expr)


def evaluate(expr: str, scrapes: list[Scrape], index: int) -> Vector:
    """The value of ``expr`` at ``scrapes[index]``, as Prometheus would compute it."""
    return _eval(parse(expr), scrapes, index)


def _series(scrape: Scrape, name: str) -> Vector:
    return {labels: value for (metric, labels), value in scrape.samples.items() if metric == name}


def _eval(tree: tuple, scrapes: list[Scrape], index: int) -> Vector:  # type: ignore[type-arg]
    kind = tree[0]
    if kind == "selector":
        return _series(scrapes[index], tree[1])
    if kind == "rate":
        _, name, window = tree
        now = scrapes[index]
        start = next((s for s in scrapes[: index + 1] if now.at - s.at <= window), now)
        if start is now:
            return {}
        before = _series(start, name)
        seconds = now.at - start.at
        return {labels: max(value - before.get(labels, 0.0), 0.0) / seconds
                for labels, value in _series(now, name).items()}
    if kind == "aggregate":
        _, how, by, inner = tree
        groups: dict[Labels, list[float]] = defaultdict(list)
        for labels, value in _eval(inner, scrapes, index).items():
            groups[frozenset((k, v) for k, v in labels if k in by)].append(value)
        return {labels: (sum(values) if how == "sum" else max(values)) for labels, values in groups.items()}
    if kind == "quantile":
        _, quantile, inner = tree
        histograms: dict[Labels, list[tuple[float, float]]] = defaultdict(list)
        for labels, value in _eval(inner, scrapes, index).items():
            le = dict(labels).get("le")
            if le is not None:
                histograms[frozenset((k, v) for k, v in labels if k != "le")].append((float(le), value))
        out = {}
        for labels, buckets in histograms.items():
            value = histogram_quantile(quantile, buckets)
            if not math.isnan(value):
                out[labels] = value
        return out
    raise ValueError(f"unsupported expression {tree!r}")


def histogram_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's estimate from cumulative (upper bound, count) buckets: linear within the bucket."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][0] != math.inf or buckets[-1][1] <= 0:
        return math.nan
    rank = quantile * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for upper_bound, count in buckets:
        if count >= rank:
            if upper_bound == math.inf:
                return lower_bound  # the highest finite bound, as Prometheus answers
            if count == lower_count:
                return upper_bound
            return lower_bound + (upper_bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = upper_bound, count
    return math.nan
