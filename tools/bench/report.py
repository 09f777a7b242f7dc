"""Medians, per-round ratios and the goals, as a table (stdout, reStructuredText) and JSON."""

from __future__ import annotations

import statistics
from typing import Any

OURS = "rivven_kproto"
NULL = "null"
ACL_PEER = "rivven_kproto-acl"  # ours with an authorizer and 1,000 ACLs (``--peer acl``)
PG_PEER = "rivven_kproto-pg"  # ours on the PostgreSQL engine (``--peer postgresql``)
# "No slowdown beyond noise": the authorized run's median rate at least this share of the plain
# run's, or within the plain run's own spread (its slowest round against its median) when that is
# wider, as it is on a busy machine.
ACL_NOISE = 0.9
SHARE_GOAL = 0.5  # issue #39: share consumers against a classic group on the same topic


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _values(rounds: list[dict[str, Any]], workload: str, key: str) -> list[float]:
    return [r[workload][key] for r in rounds if workload in r and key in r[workload]]


def summarize(results: dict[str, list[dict[str, Any]]], peer: str | None) -> dict[str, Any]:
    """Per workload: each broker's medians, and ours/peer and ours/null as medians of per-round ratios."""
    workloads = [name for name in results[OURS][0] if name != "idle"]
    summary: dict[str, Any] = {}
    for name in workloads:
        row: dict[str, Any] = {}
        for broker, rounds in results.items():
            keys = {k for r in rounds if name in r for k, v in r[name].items() if isinstance(v, int | float)}
            if keys:
                row[broker] = {k: _median(_values(rounds, name, k)) for k in sorted(keys)}
        for other, label in ((peer, "vs_peer"), (NULL, "vs_null")):
            if other and other in results:
                ratios = [
                    a[name]["msgs_per_s"] / b[name]["msgs_per_s"]
                    for a, b in zip(results[OURS], results[other], strict=False)
                    if name in a and name in b and b[name]["msgs_per_s"]
                ]
                if ratios:
                    row[label] = {"per_round": [round(r, 2) for r in ratios], "median": round(_median(ratios) or 0, 2)}
        summary[name] = row
    summary["idle"] = {broker: {"rss_mib": _median([r["idle"]["rss_mib"] for r in rounds])}
                       for broker, rounds in results.items()}
    return summary


def goals(summary: dict[str, Any], peer: str | None,
          results: dict[str, list[dict[str, Any]]] | None = None) -> list[tuple[str, str, bool | None]]:
    """(goal, measured, met) for the goals of the benchmarks issue; None when not measurable."""
    out: list[tuple[str, str, bool | None]] = []
    if peer == ACL_PEER:
        return acl_goals(results or {})
    if peer == PG_PEER:
        return postgresql_goals(summary)

    def get(workload: str, broker: str, key: str) -> float | None:
        return _figure(summary, workload, broker, key)

    out += share_goals(results or {})
    if peer:
        out += round_three_goals(summary, results or {}, peer)
    throughput = ("produce-1p", "produce-8p", "consume-uncommitted", "consume-committed")
    for name in throughput:
        ratio = summary.get(name, {}).get("vs_peer", {}).get("median")
        if peer:
            out.append((f"{name}: msgs/s >= 1.0x peer", f"{ratio}x" if ratio is not None else "n/a",
                        None if ratio is None else ratio >= 1.0))
        limit = summary.get(name, {}).get("vs_null", {}).get("median")
        out.append((f"{name}: >= 0.8x the null-broker limit", f"{limit}x" if limit is not None else "n/a",
                    None if limit is None else limit >= 0.8))
    if peer:
        for name in (*throughput, "transactions", "transactions-16p", "transactions-offsets", "latency",
                     "connections"):
            ours, theirs = get(name, OURS, "broker_cpu_s"), get(name, peer, "broker_cpu_s")
            if ours is not None and theirs:
                out.append((f"{name}: broker CPU-s <= 2x peer", f"{ours:.2f} vs {theirs:.2f} ({ours / theirs:.1f}x)",
                            ours <= 2 * theirs))
        for name in ("transactions", "transactions-16p", "transactions-offsets"):
            ours, theirs = get(name, OURS, "txn_per_s"), get(name, peer, "txn_per_s")
            if ours is not None and theirs:
                out.append((f"{name}: transactions/s >= 1.5x peer",
                            f"{ours:.0f} vs {theirs:.0f} ({ours / theirs:.2f}x)", ours >= 1.5 * theirs))
            ours, theirs = get(name, OURS, "p99_ms"), get(name, peer, "p99_ms")
            if ours is not None and theirs is not None:
                out.append((f"{name}: commit p99 <= peer", f"{ours:.2f} ms vs {theirs:.2f} ms", ours <= theirs))
        for base, contended, key in (("produce-8p", "produce-8p-contended", "msgs_per_s"),
                                     ("transactions", "transactions-contended", "txn_per_s")):
            shares = []
            for broker in (OURS, peer):
                calm, busy = get(base, broker, key), get(contended, broker, key)
                shares.append(busy / calm if calm and busy is not None else None)
            if shares[0] is not None and shares[1] is not None:
                out.append((f"{contended}: degrades no worse than the peer (share of its uncontended rate)",
                            f"ours {shares[0]:.2f}, peer {shares[1]:.2f}", shares[0] >= shares[1]))
        peaks = [(get(n, OURS, "peak_rss_mib"), get(n, peer, "peak_rss_mib")) for n in throughput]
        peaks = [(a, b) for a, b in peaks if a is not None and b]
        if peaks:
            ours_peak, peer_peak = max(a for a, _ in peaks), max(b for _, b in peaks)  # type: ignore[type-var]
            out.append(("peak RSS <= 2x peer", f"{ours_peak:.0f} vs {peer_peak:.0f} MiB",
                        ours_peak <= 2 * peer_peak))  # type: ignore[operator]
    return out


# Issue #40 (performance round three): the consume goals against the null broker, the peer's best
# round and an absolute rate; the transactional goals against the peer's CPU and latency and the
# null broker's ceiling; the contended workloads against their own calm rate.
CONSUME_VS_NULL, CONSUME_RATE = 0.9, 1_000_000
TXN_ONE_VS_NULL, TXN_16_VS_PEER, TXN_16_VS_NULL = 0.95, 1.5, 0.85
CONTENDED_SHARE = 0.9


def _figure(summary: dict[str, Any], workload: str, broker: str, key: str) -> float | None:
    """One median of the summary (or a ratio's, with ``broker`` "vs_peer"/"vs_null"), if measured."""
    value = summary.get(workload, {}).get(broker, {}).get(key)
    return float(value) if value is not None else None


def _transactions(summary: dict[str, Any], workload: str, broker: str) -> float | None:
    """Transactions a workload ran: its own count, or its messages at 10 per transaction."""
    figures = summary.get(workload, {}).get(broker, {})
    if figures.get("transactions"):
        return float(figures["transactions"])
    return float(figures["messages"]) / 10 if figures.get("messages") else None


def round_three_goals(summary: dict[str, Any], results: dict[str, list[dict[str, Any]]],
                      peer: str) -> list[tuple[str, str, bool | None]]:
    """(goal, measured, met) for issue #40's goals, from one run's rounds; a goal whose workload
    did not run is left out."""
    out: list[tuple[str, str, bool | None]] = []

    def median(workload: str, broker: str, key: str) -> float | None:
        return _figure(summary, workload, broker, key)

    def ratio_to_null(workload: str) -> float | None:
        return _figure(summary, workload, "vs_null", "median")

    for name in ("consume-uncommitted", "consume-committed"):
        ours_rounds, peer_rounds = _values(results.get(OURS, []), name, "msgs_per_s"), _values(results.get(peer, []), name, "msgs_per_s")
        if not ours_rounds:
            continue
        limit = ratio_to_null(name)
        if limit is not None:
            out.append((f"#40 {name}: >= {CONSUME_VS_NULL}x the null broker (median of the rounds' ratios)",
                        f"{limit}x", limit >= CONSUME_VS_NULL))
        if peer_rounds:
            best = max(ours_rounds) / max(peer_rounds)
            out.append((f"#40 {name}: best round >= 1.0x the peer's best round",
                        f"{max(ours_rounds):,.0f} vs {max(peer_rounds):,.0f} msg/s ({best:.2f}x)", best >= 1.0))
        rate = _median(ours_rounds) or 0.0
        out.append((f"#40 {name}: >= {CONSUME_RATE:,} msg/s (median)", f"{rate:,.0f} msg/s", rate >= CONSUME_RATE))
    for name in ("transactions", "transactions-16p", "transactions-offsets"):
        ours_cpu, peer_cpu = median(name, OURS, "broker_cpu_s"), median(name, peer, "broker_cpu_s")
        ours_txn, peer_txn = _transactions(summary, name, OURS), _transactions(summary, name, peer)
        if ours_cpu is not None and peer_cpu and ours_txn and peer_txn:
            ours_per, peer_per = 1000 * ours_cpu / ours_txn, 1000 * peer_cpu / peer_txn
            out.append((f"#40 {name}: broker CPU per transaction <= 1.0x the peer's",
                        f"{ours_per:.2f} vs {peer_per:.2f} ms ({ours_per / peer_per:.2f}x)", ours_per <= peer_per))
        ours_p99, peer_p99 = median(name, OURS, "p99_ms"), median(name, peer, "p99_ms")
        if ours_p99 is not None and peer_p99 is not None:
            out.append((f"#40 {name}: commit p99 <= the peer's", f"{ours_p99:.2f} vs {peer_p99:.2f} ms",
                        ours_p99 <= peer_p99))
    one = ratio_to_null("transactions")
    if one is not None:
        out.append((f"#40 transactions: >= {TXN_ONE_VS_NULL}x the null broker", f"{one}x", one >= TXN_ONE_VS_NULL))
    sixteen_peer = _figure(summary, "transactions-16p", "vs_peer", "median")
    if sixteen_peer is not None:
        out.append((f"#40 transactions-16p: >= {TXN_16_VS_PEER}x the peer", f"{sixteen_peer}x",
                    sixteen_peer >= TXN_16_VS_PEER))
    sixteen_null = ratio_to_null("transactions-16p")
    if sixteen_null is not None:
        out.append((f"#40 transactions-16p: >= {TXN_16_VS_NULL}x the null broker", f"{sixteen_null}x",
                    sixteen_null >= TXN_16_VS_NULL))
    for base, contended, key in (("produce-8p", "produce-8p-contended", "msgs_per_s"),
                                 ("transactions", "transactions-contended", "txn_per_s")):
        calm, busy = median(base, OURS, key), median(contended, OURS, key)
        if calm and busy is not None:
            out.append((f"#40 {contended}: keeps >= {CONTENDED_SHARE} of its calm rate", f"{busy / calm:.2f}",
                        busy / calm >= CONTENDED_SHARE))
    return out


# Issue #40 part 4: the PostgreSQL engine against the native log in the same run.
PG_TXN_SHARE, PG_PRODUCE_SHARE, PG_P99_FACTOR = 0.6, 0.8, 2.0


def postgresql_goals(summary: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(goal, measured, met): the PostgreSQL engine's rates as a share of the native log's (medians
    of the per-round ratios) and its commit p99 against the native log's."""
    out: list[tuple[str, str, bool | None]] = []
    for name, share in (("produce-1p", PG_PRODUCE_SHARE), ("produce-8p", PG_PRODUCE_SHARE),
                        ("transactions", PG_TXN_SHARE), ("transactions-16p", PG_TXN_SHARE)):
        row = summary.get(name, {})
        ratio = row.get("vs_peer", {}).get("median")
        if ratio:
            pg_share = 1 / ratio  # vs_peer is native / PostgreSQL per round: take the median's inverse
            out.append((f"#40 {name}: PostgreSQL >= {share}x the native log", f"{pg_share:.2f}x", pg_share >= share))
        native_p99, pg_p99 = (row.get(b, {}).get("p99_ms") for b in (OURS, PG_PEER))
        if native_p99 and pg_p99 is not None:
            out.append((f"#40 {name}: PostgreSQL commit p99 <= {PG_P99_FACTOR:g}x the native log's",
                        f"{pg_p99:.1f} vs {native_p99:.1f} ms ({pg_p99 / native_p99:.1f}x)",
                        pg_p99 <= PG_P99_FACTOR * native_p99))
    return out


def acl_goals(results: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, bool | None]]:
    """Issue #37's done-when: with an authorizer and 1,000 ACLs, no slowdown beyond noise
    against no authorizer, for every workload run (msgs/s, medians of the rounds)."""
    out: list[tuple[str, str, bool | None]] = []
    plain, authorized = results.get(OURS, []), results.get(ACL_PEER, [])
    for name in [n for n in (plain[0] if plain else {}) if n != "idle"]:
        base, acl = _values(plain, name, "msgs_per_s"), _values(authorized, name, "msgs_per_s")
        base_median, acl_median = _median(base), _median(acl)
        if not base_median or acl_median is None:
            continue
        share, spread = acl_median / base_median, min(base) / base_median
        out.append((f"{name}: with 1,000 ACLs >= {ACL_NOISE}x the rate without an authorizer, or within its spread",
                    f"{share:.2f}x (the plain run's slowest round: {spread:.2f}x its median)",
                    share >= min(ACL_NOISE, spread)))
    return out


def share_goals(results: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, bool | None]]:
    """Issue #39: the share group's records/s at least 0.5x the classic group's on the same topic,
    as the median of per-round ratios; with both groups' broker CPU per record beside it."""
    rounds = [r for r in results.get(OURS, []) if "share-consume" in r and "consume-group" in r]
    ratios = [r["share-consume"]["msgs_per_s"] / r["consume-group"]["msgs_per_s"]
              for r in rounds if r["consume-group"]["msgs_per_s"]]
    if not ratios:
        return []
    ratio = _median(ratios) or 0.0
    share_rate = _median(_values(rounds, "share-consume", "msgs_per_s")) or 0.0
    group_rate = _median(_values(rounds, "consume-group", "msgs_per_s")) or 0.0
    share_cpu = _median(_values(rounds, "share-consume", "broker_cpu_us_per_record"))
    group_cpu = _median(_values(rounds, "consume-group", "broker_cpu_us_per_record"))
    return [(f"share-consume: records/s >= {SHARE_GOAL}x the classic group's (consume-group, same topic and run)",
             f"{ratio:.2f}x ({share_rate:,.0f} vs {group_rate:,.0f} records/s; broker CPU "
             f"{share_cpu} vs {group_cpu} us/record; per round {', '.join(f'{x:.2f}' for x in ratios)})",
             ratio >= SHARE_GOAL)]


COLUMNS = ("msgs_per_s", "mb_per_s", "broker_cpu_s", "peak_rss_mib", "p50_ms", "p99_ms", "p999_ms")


def table(summary: dict[str, Any], brokers: list[str]) -> list[list[str]]:
    header = ["workload", "broker", "msg/s", "MB/s", "CPU-s", "peak RSS MiB", "p50 ms", "p99 ms", "p999 ms",
              "ours/broker per round"]
    rows = [header]
    for name, row in summary.items():
        if name == "idle":
            continue
        for broker in brokers:
            figures = row.get(broker)
            if not figures:
                continue
            ratio = ""
            if broker != OURS:
                key = "vs_null" if broker == NULL else "vs_peer"
                if key in row:
                    ratio = f"{row[key]['median']} ({', '.join(map(str, row[key]['per_round']))})"
            cells = [_cell(figures.get(c)) for c in COLUMNS]
            rows.append([name, broker, *cells, ratio])
    rows.append(["idle", "/".join(brokers), "", "", "", " / ".join(_cell(summary["idle"].get(b, {}).get("rss_mib"))
                                                             for b in brokers), "", "", "", ""])
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value >= 1000:
        return f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def render_plain(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def render_rst(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(c.ljust(w) for c, w in zip(rows[0], widths, strict=True)).rstrip(), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows[1:]]
    return "\n".join([*lines, rule])
