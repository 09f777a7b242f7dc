"""A metadata document of config values by level: ``{name: {key: value}}`` as JSON.

The dynamic broker configs (levels: the cluster default and node ids) and the group configs
(levels: group ids) are both kept this way, in the data directory or in PostgreSQL, written by
the controller and re-read by the brokers that follow it.
"""

from __future__ import annotations

import json

from .durable.work import BlockingWork, Document
from .topics import CorruptMetadata

Levels = dict[str, dict[str, str]]


def parse_levels(raw: bytes | None, document: Document) -> Levels:
    """The levels as stored (``raw``: the document's bytes, None when there is none yet)."""
    if raw is None:
        return {}
    try:
        loaded = json.loads(raw)
        return {str(name): {str(k): str(v) for k, v in values.items()} for name, values in loaded.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise CorruptMetadata(f"{document.path} is corrupt ({type(exc).__name__}: {exc})") from None


def save_level(document: Document, work: BlockingWork | None, levels: Levels, name: str,
               values: dict[str, str]) -> None:
    """``name``'s values become exactly ``values`` (an empty set removes the level); then the
    whole document is saved, as a critical job of ``work``."""
    if values:
        levels[name] = dict(values)
    else:
        levels.pop(name, None)
    document.save(work, json.dumps(levels, indent=1, sort_keys=True).encode())
