"""tools/check_spec.py: versions split across Kafka's 3.9 and 4.x schemas, and a difference found."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rivven_kproto.codec.messages.end_txn import EndTxnResponse
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.schema import Versions
from tests.spec_gate import need_spec

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


@pytest.fixture
def schemas() -> Path:
    """Kafka's schemas beside the repository: skipped on a plain clone, required where CI says so."""
    need_spec(SPEC_DIR.parent / "messages-4x")
    return SPEC_DIR


def test_produce_is_checked_against_both_schema_sets(schemas: Path) -> None:
    paths = check_spec.spec_paths(SPEC_DIR, ProduceRequest)
    assert [(p.parent.name, scope) for p, scope in paths] == [("messages", Versions(0, 11)), ("messages-4x", Versions(12, 12))]


def test_a_wrong_version_of_a_new_field_is_found(schemas: Path) -> None:
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


def test_every_declaration_matches_kafkas_schemas(schemas: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The spec gate itself, inside the test suite: a difference fails here too, not only in tox's spec env."""
    assert check_spec.main(["--spec-dir", str(schemas)]) == 0, capsys.readouterr().out


def _run_without_schemas(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The tool as tox's spec env runs it, pointed at a directory with no schemas (a plain clone)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("RIVVEN_REQUIRE_SPEC", "KPROTO_SPEC_DIR")}
    missing = tmp_path / "empty" / "messages"
    (tmp_path / "empty").mkdir()
    return subprocess.run(
        [sys.executable, str(TOOL), "--spec-dir", str(missing)],
        capture_output=True, text=True, env={**clean, **env}, timeout=120,
    )


def test_absent_schemas_skip_with_a_notice_on_a_plain_clone(tmp_path: Path) -> None:
    result = _run_without_schemas(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr and "RIVVEN_REQUIRE_SPEC" in result.stderr


def test_absent_schemas_fail_where_ci_requires_them(tmp_path: Path) -> None:
    result = _run_without_schemas(tmp_path, RIVVEN_REQUIRE_SPEC="1")
    assert result.returncode != 0
    assert "spec directory not found" in result.stderr
