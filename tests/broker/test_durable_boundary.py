"""The broker's I/O boundary: only the durability component fsyncs or writes files by itself.

Every ``os.fsync`` goes through ``broker/durable/files.py``; files are opened for writing only in
``broker/durable/`` and in the places listed in ``WRITERS`` with the reason they may. A new place
that writes or syncs fails this test until it uses the component (or is listed, with a reason).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rivven_kproto.broker

BROKER = Path(rivven_kproto.broker.__file__).parent
DURABLE = BROKER / "durable"
FSYNC_HOME = DURABLE / "files.py"
WRITERS = {
    # The log's own data files: appends reach the page cache only; the flusher syncs them.
    "log/descriptor_cache.py": "segment files (every segment's .log is opened through the cache)",
    "log/index.py": "index files (written and fsynced at flushes, by path)",
    # Advisory lock held for the broker's lifetime (no data in it that must survive).
    "datadir_lock.py": "the data-directory lock file",
    # /dev/null as the sink of a sendfile that brings a fetch region's pages into the page cache.
    "log/region.py": "/dev/null (nothing is written)",
}
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC")


def _is_os_call(node: ast.Call, name: str) -> bool:
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name) \
        and func.value.id == "os"


def _mode(node: ast.Call, position: int) -> str:
    if len(node.args) > position and isinstance(node.args[position], ast.Constant):
        return str(node.args[position].value)
    for keyword in node.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    return "r"


def findings(path: Path) -> list[str]:
    """Every fsync and every write-mode open in one module, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        what = None
        if _is_os_call(node, "fsync"):
            what = "os.fsync"
        elif _is_os_call(node, "open") and len(node.args) > 1 and any(
                flag in ast.unparse(node.args[1]) for flag in WRITE_FLAGS):
            what = "os.open for writing"
        elif _is_os_call(node, "fdopen") and any(c in _mode(node, 1) for c in "wax+"):
            what = "os.fdopen for writing"
        elif isinstance(func, ast.Name) and func.id == "open" and any(c in _mode(node, 1) for c in "wax+"):
            what = "open for writing"
        elif isinstance(func, ast.Attribute) and func.attr == "open" and not _is_os_call(node, "open") \
                and any(c in _mode(node, 0) for c in "wax+"):
            what = "Path.open for writing"
        elif isinstance(func, ast.Attribute) and func.attr in ("write_bytes", "write_text"):
            what = f"Path.{func.attr}"
        if what is not None:
            found.append(f"{node.lineno}: {what}")
    return found


def test_only_the_durability_component_fsyncs() -> None:
    offenders = {
        str(path.relative_to(BROKER)): hits
        for path in BROKER.rglob("*.py")
        if path != FSYNC_HOME and (hits := [h for h in findings(path) if h.endswith("os.fsync")])
    }
    assert offenders == {}


def test_files_are_written_only_by_the_durability_component_and_the_listed_writers() -> None:
    offenders = {}
    for path in BROKER.rglob("*.py"):
        name = str(path.relative_to(BROKER))
        if path.is_relative_to(DURABLE) or name in WRITERS:
            continue
        hits = [h for h in findings(path) if not h.endswith("os.fsync")]
        if hits:
            offenders[name] = hits
    assert offenders == {}


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom pathlib import Path\n"
        "os.fsync(1)\nos.open('f', os.O_WRONLY | os.O_CREAT)\nos.open('f', os.O_RDONLY)\n"
        "open('f', 'wb')\nopen('f')\nPath('f').open('a')\nPath('f').write_bytes(b'')\nos.fdopen(3, 'w')\n"
    )
    assert findings(sample) == [
        "3: os.fsync", "4: os.open for writing", "6: open for writing", "8: Path.open for writing",
        "9: Path.write_bytes", "10: os.fdopen for writing",
    ]
    assert all(findings(BROKER / name) for name in WRITERS)  # each listed writer still writes
