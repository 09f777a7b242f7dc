"""Handlers take their authorization checks from the table, never by hand (issue #37, "One table").

A check written by hand (``ctx.allowed(Operation.READ, ResourceType.TOPIC, name)``) escapes the
table and so the exhaustive table test's reading of it: DescribeTransactions, OffsetDelete,
InitProducerId and the KIP-848 handlers did so. The authorizer is asked only by the request
context (``permits``/``refusal`` of a table check, and the authorized-operations bit sets) and
by the ACL modules themselves; elsewhere no call to it may name an operation itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rivven_kproto

PACKAGE = Path(rivven_kproto.__file__).parent
# The authorizer's own modules and the one place the server asks it (RequestContext).
ASKERS = frozenset({"broker/security/acls.py", "broker/security/acl_index.py", "server/context.py"})
AUTHORIZER_CALLS = frozenset({"allowed", "allowed_on_any_topic", "authorize", "authorize_any_topic"})
HANDLER_CALLS = frozenset({"allowed", "allowed_on_any_topic"})  # a handler uses permits/refusal instead


def _names_an_operation(call: ast.Call) -> bool:
    """An argument written as ``Operation.X`` (or ``O.X``): an operation chosen by hand."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id in ("Operation", "O"):
            return True
    return False


def hand_written_checks() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ASKERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            in_handler = relative.startswith("server/handlers/")
            if (in_handler and name in HANDLER_CALLS) or (name in AUTHORIZER_CALLS and _names_an_operation(node)):
                found.append(f"{relative}:{node.lineno} {name}(...)")
    return found


def checks_made_outside_the_table() -> list[str]:
    """``Check``/``Grant`` built anywhere but the table: permits/refusal would take a made-up row."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "broker/security/authorization_rules.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Check", "Grant"):
                found.append(f"{relative}:{node.lineno} {node.func.id}(...)")
    return found


def test_checks_are_only_made_in_the_table() -> None:
    assert checks_made_outside_the_table() == []


def test_no_authorization_check_is_written_by_hand() -> None:
    found = hand_written_checks()
    assert not found, "authorization decided outside the table (use rule(API).check(label)):\n" + "\n".join(found)
