"""The interpreter's heap as a long-running server wants it: what start-up loaded is frozen.

CPython's full (generation 2) collection walks every tracked object, holding the GIL, whichever
thread triggers it. A broker's start-up leaves a large, long-lived heap (the code, the ACL index,
the topic table): a client whose large request makes the collector run full (issue #37 item 5:
one Metadata request naming 24,000 topics) then stalled every other client for the whole walk,
60-110 ms with 10,000 ACLs loaded, even with the request decoded and encoded on worker threads.
Frozen objects (``gc.freeze``) are skipped by every collection; what start-up left as garbage is
collected first, so nothing unreachable is frozen. Objects created later are collected as usual.
The price: a frozen object is still freed when its last reference goes, but one that later
becomes part of unreachable cycles (say, a topic loaded at start-up and deleted since) stays;
that is bounded by the start-up heap, once.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def settle() -> int:
    """Collect start-up's garbage, then freeze what remains; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("froze %d objects left by start-up: full collections skip them", frozen)
    return frozen


def release() -> None:
    """Unfreeze (the broker stopped: in a process that goes on, such as a test run, they are collectable again)."""
    gc.unfreeze()
