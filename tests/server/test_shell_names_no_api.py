"""The server shell names no API; every handler declares its route (issue #38, part 1).

Dispatch is one pipeline for every API (route, authorize, prepare, handle, await, effects,
encode): what differs per API is declared by its handler module (``ROUTE``, ``prepare``,
``on_fenced``, ...), never branched on in ``server/app.py``. A branch on an API key there
(``event.api_key == PRODUCE_API_KEY``, ``api_key in CONTROLLER_APIS``), or an import of one API's
message or handler module, escapes the declarations: read statically, like the authorization
table's test (test_checks_from_the_table.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rivven_kproto
from rivven_kproto.server.handlers import _MODULES, _UNADVERTISED, HANDLERS, SERVED
from rivven_kproto.server.routes import Route

PACKAGE = Path(rivven_kproto.__file__).parent
SHELL = ("server/app.py",)
HANDLER_PACKAGE = "rivven_kproto.server.handlers"


def _imported_modules(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, absolute module) of every ``from X import ...`` in a module of ``server/``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                module = f"rivven_kproto.server.{module}" if module else "rivven_kproto.server"
            found.append((node.lineno, module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def api_specifics(source: str, relative: str) -> list[str]:
    """Where ``source`` branches on an API: a comparison with an ``api_key``, a name of API keys,
    an import of one API's message (codec.messages.*) or handler module (handlers.<api>)."""
    tree = ast.parse(source, relative)
    found = []
    for line, module in _imported_modules(tree):
        if module.startswith("rivven_kproto.codec.messages.") or module.startswith(HANDLER_PACKAGE + "."):
            found.append(f"{relative}:{line} imports {module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "api_key" for o in operands):
                found.append(f"{relative}:{node.lineno} compares an api_key")
        elif isinstance(node, ast.Name | ast.alias):
            name = node.id if isinstance(node, ast.Name) else (node.asname or node.name)
            if name.endswith("API_KEY") or name.endswith("_APIS"):
                found.append(f"{relative}:{getattr(node, 'lineno', 0)} names {name}")
    return sorted(set(found))


def shell_specifics() -> list[str]:
    return [found for relative in SHELL for found in api_specifics((PACKAGE / relative).read_text(), relative)]


def test_the_shell_names_no_api() -> None:
    found = shell_specifics()
    assert not found, "an API named in the server shell (declare it in the handler module instead):\n" + "\n".join(found)


def test_the_check_sees_a_branch_on_an_api() -> None:
    """The reading itself: each kind of API-specific code is found (so the test above can fail)."""
    source = (
        "from .handlers.produce import API_KEY as PRODUCE_API_KEY\n"
        "from rivven_kproto.codec.messages.fetch import FetchRequest\n"
        "CONTROLLER_APIS = frozenset({19})\n"
        "def f(event):\n"
        "    return event.api_key == 0\n"
    )
    found = api_specifics(source, "app.py")
    assert [line.split(" ", 1)[1] for line in found] == [
        "imports rivven_kproto.server.handlers.produce", "names PRODUCE_API_KEY",
        "imports rivven_kproto.codec.messages.fetch", "names CONTROLLER_APIS", "compares an api_key",
    ]


def test_every_handler_module_declares_a_route() -> None:
    """In the source (``ROUTE = ...`` at module level), not by a default the registry fills in."""
    missing = []
    for module in [*_MODULES, *_UNADVERTISED]:
        tree = ast.parse(Path(module.__file__ or "").read_text())
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        if "ROUTE" not in names:
            missing.append(module.__name__)
    assert missing == []
    assert all(isinstance(handler.route, Route) for handler in SERVED.values()) and set(HANDLERS) < set(SERVED)
