"""Test-only faults: with ``KPROTO_FAULT=<name>`` the broker exits hard when it reaches ``name``.

Used by the crash tests to stop the process at an exact step (after PrepareCommit is logged,
after k of n markers, before CompleteCommit) and check what recovery makes of it. ``os._exit``
skips every cleanup, exactly like ``kill -9`` at that instruction. A few names change a behaviour
instead (``fault_active``): ``refuse-txn-markers`` makes WriteTxnMarkers fail, as a leader the
coordinator cannot reach would, leaving transactions waiting for this broker's markers.
"""

from __future__ import annotations

import logging
import os

FAULT_ENV = "KPROTO_FAULT"
EXIT_CODE = 86
_armed = os.environ.get(FAULT_ENV, "")

log = logging.getLogger(__name__)


def fault_point(name: str) -> None:
    if _armed and _armed == name:
        log.critical("fault point %s reached: exiting hard", name)
        os._exit(EXIT_CODE)


def fault_active(name: str) -> bool:
    return _armed == name
