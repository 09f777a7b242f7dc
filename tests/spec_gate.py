"""Tests that read Kafka's JSON schemas beside the repository (``../shared/kafka-protocol``).

A plain clone has no such directory, so these tests skip there; CI has it and exports
``RIVVEN_REQUIRE_SPEC=1`` (``.ci/run``), so a missing directory fails instead of silently skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUIRE_ENV = "RIVVEN_REQUIRE_SPEC"


def spec_required() -> bool:
    """True where the schemas must be present (CI)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def need_spec(path: Path) -> None:
    """Skip the calling test when ``path`` is absent, or fail it when the schemas are required."""
    if path.exists():
        return
    message = f"Kafka's schemas not found: {path}"
    if spec_required():
        pytest.fail(f"{message} ({REQUIRE_ENV} is set)")
    pytest.skip(f"{message} (a plain clone; set {REQUIRE_ENV}=1 to require them)")
