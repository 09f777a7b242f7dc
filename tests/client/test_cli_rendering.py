"""How the kproto CLI renders for people: tables that keep every cell readable, and groups
without a verb that show their help (#41)."""

from __future__ import annotations

import io

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from rivven_kproto.cli.main import main
from rivven_kproto.cli.output import table


def rendered(width: int, *items: object) -> list[str]:
    """The lines rich prints for ``items`` on a console ``width`` columns wide (a pipe's 160)."""
    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False, color_system=None)
    for item in items:
        console.print(item)
    return out.getvalue().splitlines()


def column_edges(line: str) -> list[int]:
    """Where the vertical rules of a table line are (box characters of any weight)."""
    return [i for i, char in enumerate(line) if char in "│┃┡┩╇┏┓┳┗┛┻└┘┴┌┐┬├┤┼╿╽"]


def test_a_wide_column_does_not_squeeze_the_others_to_nothing() -> None:
    """The Kafka-releases table of ``cluster info``: one long cell wider than the console must wrap,
    not shrink the short columns to zero width (release names were invisible, a row cut off)."""
    behind = " ".join(f"{key}:-/{key % 7}" for key in range(60))  # ~430 characters
    rows = [["3.9", 35, 23, 0, behind], ["4.2", 32, 45, 1, behind + " 99:1/2"]]
    columns = ["release", "at its newest", "behind or missing", "beyond", "behind (key: ours/its)"]
    lines = rendered(160, table("Kafka releases", columns, rows, wrap=(columns[-1],)))
    body = [line for line in lines[1:] if line]
    assert all(len(line) <= 160 for line in body), body
    header = next(line for line in body if "release" in line)
    for name in ("release", "at its newest", "behind or missing", "beyond"):
        assert name in header, header
    assert any(line.startswith("│ 3.9 ") for line in body) and any(line.startswith("│ 4.2 ") for line in body), body
    text = "".join(line.split("│")[-2].strip() + " " for line in body if line.startswith("│"))
    assert "99:1/2" in text and f"{59}:-/{59 % 7}" in text  # the whole last row, wrapped, nothing cut off
    edges = {tuple(column_edges(line)) for line in body}
    assert len(edges) == 1, edges  # every line's column rules at the same places: columns aligned


def _groups(command: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every group of the command tree (the top level included), found by walking it as click
    does (the top level loads its verbs lazily)."""
    found = [path]
    ctx = click.Context(command, info_name=" ".join(("kproto", *path)))
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if isinstance(sub, click.Group):
            found += _groups(sub, (*path, name))
    return found


@pytest.mark.parametrize("path", _groups(main), ids=lambda path: " ".join(path) or "kproto")
def test_every_group_without_its_verb_prints_its_help(path: tuple[str, ...]) -> None:
    """As click does for a group without a command: the multi-line help on stderr, exit 2 (#41)."""
    result = CliRunner().invoke(main, list(path), prog_name="kproto")
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "error:" not in result.stderr, result.stderr
    assert result.stderr.startswith(" ".join(("Usage: kproto", *path)) + " [OPTIONS] COMMAND"), result.stderr
    assert "\nCommands:\n" in result.stderr and "\nOptions:\n" in result.stderr
    assert len(result.stderr.splitlines()) > 5


def test_the_walk_finds_every_group() -> None:
    assert {"topics", "groups", "acls", "users", "txns", "configs", "cluster", "log", "producers"} <= {
        path[0] for path in _groups(main) if path
    }


def test_serve_offers_the_brokers_fsync_policies() -> None:
    """``serve --fsync`` lists its choices without importing the broker (start-up time)."""
    from rivven_kproto.broker.config import FSYNC_POLICIES
    from rivven_kproto.cli.main import FSYNC_CHOICES

    assert FSYNC_CHOICES == FSYNC_POLICIES


def test_a_verb_imports_only_its_own_module() -> None:
    """``kproto produce`` starts without the broker or the other verbs (#41 bulk speed)."""
    import subprocess
    import sys

    probe = ("import sys; from rivven_kproto.cli.main import main; "
             "main.get_command(None, 'produce'); "
             "print(sorted(m for m in sys.modules if m.startswith(('rivven_kproto.broker.config', 'rivven_kproto.cli.'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "rivven_kproto.cli.produce" in loaded
    for absent in ("rivven_kproto.broker.config", "rivven_kproto.cli.verify_eos", "rivven_kproto.cli.users"):
        assert absent not in loaded, loaded
