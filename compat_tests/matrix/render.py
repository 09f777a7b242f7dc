"""The matrix as reStructuredText (a simple table plus numbered notes) and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from .model import CAPABILITIES, FAIL, NA, PASS
from .runner import Report

NOTE_CHARS = 400  # the JSON keeps every detail in full


def _version_lines(info: dict[str, str]) -> list[str]:
    lines = [info.get("version", "?")]
    for key in ("librdkafka", "node", "debian"):
        if key in info:
            lines.append(f"{'Debian ' if key == 'debian' else key + ' '}{info[key]}")
    return lines


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def counts(report: Report) -> dict[str, int]:
    return {status: sum(o.status == status for o in report.outcomes) for status in (PASS, FAIL, NA)}


def to_rst(report: Report) -> str:
    clients = list(report.clients)
    notes: list[str] = []

    def note(text: str) -> int:
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    rows: list[list[str]] = []
    for capability in CAPABILITIES:
        row = [capability.title]
        for client in clients:
            try:
                outcome = report.outcome(client, capability.id)
            except KeyError:
                row.append("")
                continue
            if outcome.status == PASS:
                row.append("pass")
            elif outcome.status == NA:
                row.append(f"n/a [{note(outcome.detail)}]_")
            else:
                row.append(f"**fail** [{note(f'{client}, {capability.title}: {outcome.detail}')}]_")
        if any(row[1:]):
            rows.append(row)

    header = [["capability", *clients]]
    versions = [_version_lines(report.clients[c]) for c in clients]
    for i in range(max(len(v) for v in versions)):
        header.append(["", *(v[i] if i < len(v) else "" for v in versions)])
    widths = [max(len(r[i]) for r in header + rows) for i in range(len(clients) + 1)]
    rule = "  ".join("=" * w for w in widths)

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    total = counts(report)
    out = [
        f"Generated {report.started_at} against {report.target} in {_duration(report.duration_s)}: "
        f"{total[PASS]} pass, {total[FAIL]} fail, {total[NA]} n/a "
        f"(Python {report.environment.get('python', '?')}).",
        "",
        rule,
        *(line(r) for r in header),
        rule,
        *(line(r) for r in rows),
        rule,
        "",
    ]
    for number, text in enumerate(notes, 1):
        text = " ".join(text.split())
        out.append(f".. [{number}] {text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS] + ' [...]'}")
    return "\n".join(out) + "\n"


def to_json(report: Report) -> str:
    data = report.as_json()
    data["counts"] = counts(report)
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def write(report: Report, out_dir: Path, stem: str = "results") -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rst, js = out_dir / f"{stem}.rst", out_dir / f"{stem}.json"
    rst.write_text(to_rst(report))
    js.write_text(to_json(report))
    return rst, js
