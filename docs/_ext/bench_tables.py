"""``.. bench-table:: ../benchmarks/results/DATE.json``: a benchmark table generated from its result file.

The figures come from the JSON that ``python -m tools.bench --json`` wrote, through the tool's own
report code (tools/bench/report.py), so the page shows what the run measured, not a copy of it.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


class BenchTable(SphinxDirective):
    """Medians per workload and broker, and ours/broker per round, as the tool prints them.

    ``:peer:`` names the peer broker of the run; ``:brokers:`` (comma-separated) the brokers shown,
    all of the file's by default.
    """

    required_arguments = 1
    option_spec = {"peer": directives.unchanged, "brokers": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from tools.bench import report

        path = (Path(self.env.doc2path(self.env.docname)).parent / self.arguments[0]).resolve()
        self.env.note_dependency(str(path))
        results = json.loads(path.read_text())
        rounds = results["rounds"]
        brokers = [b.strip() for b in self.options.get("brokers", ",".join(rounds)).split(",")]
        summary = report.summarize(rounds, self.options.get("peer"))
        table = report.render_rst(report.table(summary, brokers)).splitlines()
        container = nodes.container()
        self.state.nested_parse(StringList(table, source=str(path)), self.content_offset, container)
        return list(container.children)


class CliBulkTable(SphinxDirective):
    """``.. cli-bulk-table:: ../benchmarks/results/DATE-cli-bulk.json``: kproto against kcat, as
    ``python -m tools.bench.cli_bulk`` prints it (tools/bench/cli_bulk.py renders the rows)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from tools.bench import cli_bulk

        path = (Path(self.env.doc2path(self.env.docname)).parent / self.arguments[0]).resolve()
        self.env.note_dependency(str(path))
        table = cli_bulk.render_rst(cli_bulk.table_rows(json.loads(path.read_text()))).splitlines()
        container = nodes.container()
        self.state.nested_parse(StringList(table, source=str(path)), self.content_offset, container)
        return list(container.children)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("bench-table", BenchTable)
    app.add_directive("cli-bulk-table", CliBulkTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
