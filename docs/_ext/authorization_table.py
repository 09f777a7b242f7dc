"""``.. authorization-table::``: every served API's authorization checks, generated from the table.

The rows come from ``rivven_kproto/broker/security/authorization_rules.py``, the data the
handlers take their checks from (and ``compat_tests/test_authorization_table.py`` walks), so
the page cannot drift from what the broker does.
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

RESOURCE = {"TOPIC": "Topic", "GROUP": "Group", "CLUSTER": "Cluster", "TRANSACTIONAL_ID": "TransactionalId"}
SCOPE = {"request": "the whole request", "entry": "that entry", "filter": "left out of the answer",
         "details": "its details withheld"}


def _operation(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _check(check: object) -> str:
    """One check as a sentence: "Describe on Topic (each topic entry's name): ..."."""
    from rivven_kproto.broker.security.authorization_rules import Check, Source

    assert isinstance(check, Check)
    what = f"{_operation(check.operation.name)} on {RESOURCE[check.resource_type.name]}"
    if check.source is not Source.CLUSTER:
        what += f", for {check.source.value}"
    for grant in check.alternatives:
        what += f", or {_operation(grant.operation.name)} on {RESOURCE[grant.resource_type.name]}"
        if grant.source is Source.ANY_TOPIC:
            what += " (any topic)"
    refused = f"``{check.error.name}``" if check.error is not None else "no error"
    what += f": {refused}, {SCOPE[check.scope.value]}"
    if check.versions is not None:
        low, high = check.versions
        what += f"; v{low}-{high}" if high < 1000 else f"; v{low}+"
    if check.when:
        what += "; request shapes: " + ", ".join(sorted(shape or "default" for shape in check.when))
    return what


def table_lines() -> list[str]:
    from rivven_kproto.broker.security.authorization_rules import RULES

    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 18 52 30", "",
             "   * - API (key)", "     - Checks, in order (the first refused decides)", "     - Note"]
    for key in sorted(RULES):
        row = RULES[key]
        checks = "; ".join(f"({i}) {_check(c)}" for i, c in enumerate(row.checks, 1)) or "none"
        lines += [f"   * - {row.name} ({key})", f"     - {checks}", f"     - {row.note or ''}"]
    return lines


class AuthorizationTable(SphinxDirective):
    """The table of ``RULES`` as a list-table: API, its checks in order, the row's note."""

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(table_lines(), source="authorization_rules.py"), self.content_offset,
                                container)
        return list(container.children)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("authorization-table", AuthorizationTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
