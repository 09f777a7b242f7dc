"""Reading the transaction coordinator's log as written before the shared durable log.

Earlier versions kept ``<data_dir>/meta/txn/txn.log`` (entries ``u32 length | u64 xxh64(payload)
| payload``, no magic) and ``txn.snapshot`` (``u64 xxh64(payload) | payload``, the JSON object of
every id's metadata). ``read_legacy`` returns that state so the coordinator can write it as a
snapshot of its durable log; ``remove_legacy`` deletes the old files afterwards.
"""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path
from typing import Any

import xxhash

from ..durable.files import fsync_dir

log = logging.getLogger(__name__)

LOG_NAME = "txn.log"
SNAPSHOT_NAME = "txn.snapshot"
_ENTRY = struct.Struct(">IQ")
_SUM = struct.Struct(">Q")
MAX_ENTRY = 16 * 1024 * 1024


def read_legacy(directory: Path) -> dict[str, dict[str, Any]]:
    """Every transactional id's metadata from the old files (empty when there are none)."""
    state: dict[str, dict[str, Any]] = {}
    snapshot = directory / SNAPSHOT_NAME
    if snapshot.exists():
        data = snapshot.read_bytes()
        if len(data) >= _SUM.size and _SUM.unpack_from(data)[0] == xxhash.xxh64_intdigest(data[_SUM.size :]):
            state = json.loads(data[_SUM.size :])
        else:
            log.error("old transaction snapshot %s is corrupt; reading its log alone", snapshot)
    path = directory / LOG_NAME
    data = path.read_bytes() if path.exists() else b""
    pos = 0
    while pos + _ENTRY.size <= len(data):
        length, checksum = _ENTRY.unpack_from(data, pos)
        end = pos + _ENTRY.size + length
        payload = data[pos + _ENTRY.size : end]
        if length > MAX_ENTRY or end > len(data) or xxhash.xxh64_intdigest(payload) != checksum:
            log.warning("old transaction log %s ends in a torn entry at byte %d", path, pos)
            break
        entry = json.loads(payload)
        state[entry["transactional_id"]] = entry
        pos = end
    return state


def has_legacy(directory: Path) -> bool:
    return (directory / LOG_NAME).exists() or (directory / SNAPSHOT_NAME).exists()


def remove_legacy(directory: Path) -> None:
    for name in (LOG_NAME, SNAPSHOT_NAME):
        (directory / name).unlink(missing_ok=True)
    fsync_dir(directory)
