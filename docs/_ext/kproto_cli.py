"""``.. kproto-cli::``: the CLI reference, generated at build time from the click commands.

Every command and group of ``kproto`` gets a section with its ``--help`` text, so the reference
cannot drift from the code: a new verb or option appears at the next build.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

HELP_WIDTH = 88
HEADING_CHARS = "-~^\""


def walk(command: click.Command, ctx: click.Context, depth: int = 0) -> Iterator[tuple[int, click.Context]]:
    """(depth, context) of the command and every subcommand, in help order."""
    yield depth, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from walk(sub, click.Context(sub, info_name=name, parent=ctx, max_content_width=HELP_WIDTH,
                                               terminal_width=HELP_WIDTH), depth + 1)


def reference_rst(command: click.Command, name: str) -> list[str]:
    """The reference as reStructuredText: a heading per command path and its help as a literal block."""
    settings = {**command.context_settings, "max_content_width": HELP_WIDTH, "terminal_width": HELP_WIDTH}
    root = click.Context(command, info_name=name, **settings)  # -h/--help as the command spells it
    out: list[str] = []
    for depth, ctx in walk(command, root):
        title = ctx.command_path
        out += [title, HEADING_CHARS[min(depth, len(HEADING_CHARS) - 1)] * len(title), "", "::", ""]
        out += ["   " + line if line else "" for line in ctx.command.get_help(ctx).splitlines()]
        out.append("")
    return out


class KprotoCli(SphinxDirective):
    """Insert the reference of ``kproto`` (rivven_kproto.cli.main:main)."""

    def run(self) -> list[nodes.Node]:
        from rivven_kproto.cli.main import main

        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(reference_rst(main, "kproto"), source="kproto --help"),
                                 container)
        return list(container.children)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("kproto-cli", KprotoCli)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
