"""README.rst's performance summary is what its results file says (``python -m tools.bench.readme``)."""

from __future__ import annotations

import copy
import json

from tools.bench import readme


def test_readme_summary_matches_its_results_file() -> None:
    text = readme.README.read_text()
    wanted, start, end = readme.expected(text)
    assert text[start:end] == wanted, "run: python -m tools.bench.readme --write"


def test_summary_follows_the_figures() -> None:
    text = readme.README.read_text()
    source = readme.START.search(text).group("path")  # type: ignore[union-attr]
    document = json.loads((readme.ROOT / source).read_text())
    before = readme.render(document, source)
    changed = copy.deepcopy(document)
    changed["summary"]["produce-8p"]["rivven_kproto"]["msgs_per_s"] = 123_456_789
    changed["goals"] = [{**g, "met": not g["met"]} if g["goal"].startswith("#40 ") else g for g in changed["goals"]]
    after = readme.render(changed, source)
    assert "123,456,789" in after and "123,456,789" not in before
    met_before = sum(1 for g in document["goals"] if g["goal"].startswith("#40 ") and g["met"])
    assert f"{met_before} of" in before
    assert before != after
