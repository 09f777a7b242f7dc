"""tools/check_spec.py: versions split across Kafka's 3.9 and 4.x schemas, and a difference found."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from rivven_kproto.codec.messages.end_txn import EndTxnResponse
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.schema import Versions

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_spec.py"


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_spec", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_spec"] = module
    spec.loader.exec_module(module)
    return module


check_spec = _tool()
SPEC_DIR = check_spec.DEFAULT_SPEC_DIR
pytestmark = pytest.mark.skipif(not (SPEC_DIR.parent / "messages-4x").is_dir(), reason="no Kafka schemas in ../shared")


def test_produce_is_checked_against_both_schema_sets() -> None:
    paths = check_spec.spec_paths(SPEC_DIR, ProduceRequest)
    assert [(p.parent.name, scope) for p, scope in paths] == [("messages", Versions(0, 11)), ("messages-4x", Versions(12, 12))]


def test_a_wrong_version_of_a_new_field_is_found() -> None:
    checker = check_spec.Checker()
    (_, older), (path, scope) = check_spec.spec_paths(SPEC_DIR, EndTxnResponse)
    assert (older, scope, path.parent.name) == (Versions(0, 4), Versions(5, 5), "messages-4x")
    spec = check_spec.load_spec(path)
    checker.check_message(EndTxnResponse, spec, scope)
    assert checker.problems == []
    for field in spec["fields"]:
        if field["name"] == "ProducerEpoch":
            field["versions"] = "6+"  # absent at v5
    checker.check_message(EndTxnResponse, spec, scope)
    assert checker.problems and "producer_epoch" in checker.problems[0]
