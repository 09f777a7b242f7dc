"""Who may read the data directory: the broker's user only (issue #37 item 12).

``meta/scram.json`` holds salted SCRAM keys (enough for an offline dictionary attack) and
``meta/acls.json`` the authorization policy; dynamic broker configs may hold passwords. The data
directory is created 0700 and every metadata document written 0600. Kafka leaves both to the
umask; this is stricter. A broker started on a directory someone made looser keeps the modes it
finds (an operator may share it on purpose) but says so at start.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
SECRET_DOCUMENTS = ("scram.json", "acls.json")

log = logging.getLogger(__name__)


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with the leaf 0700; an existing one is left as is."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)


def warn_if_loose(data_dir: Path) -> list[str]:
    """Warn about the data directory and secret documents others may read; the warnings."""
    warnings = []
    for path, kind in [(data_dir, "data directory"), *((data_dir / "meta" / name, "file") for name in SECRET_DOCUMENTS)]:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            wanted = PRIVATE_DIR_MODE if path == data_dir else PRIVATE_FILE_MODE
            warnings.append(f"{kind} {path} is mode {mode:04o}: others may read SCRAM credentials and ACLs "
                            f"(chmod {wanted:o} {path})")
    for warning in warnings:
        log.warning("%s", warning)
    return warnings
