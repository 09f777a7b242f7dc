"""A partition directory on disk: creating it, finding its segments, recovering them, removing it.

``NativeEngineLog.open`` uses these at start-up and when a topic is created; ``remove_deleted`` runs
when the broker opens, finishing deletions a crash interrupted (see ``NativeEngineLog.delete``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from rivven_kproto.broker.durable import files as checkpoint
from rivven_kproto.broker.log.segment import LOG_SUFFIX, Segment

logger = logging.getLogger(__name__)

DELETED_SUFFIX = "-deleted"  # a deleted partition's directory, renamed until its files are removed


def dropped_when_deleted(job: Callable[[], None], deleted: Callable[[], bool], name: str) -> Callable[[], None]:
    """``job`` (a checkpoint, snapshot or segment deletion in partition ``name``'s directory),
    unless the partition is ``deleted`` first: then it is dropped quietly, also when the directory
    goes while it runs (DeleteRecords answered, DeleteTopics a millisecond later)."""

    def guarded() -> None:
        if deleted():
            logger.debug("dropped a queued file job of deleted partition %s", name)
            return
        try:
            job()
        except FileNotFoundError:
            if not deleted():
                raise
            logger.debug("dropped a file job of %s: the partition was deleted meanwhile", name)

    return guarded


def remove_deleted(data_dir: Path) -> None:
    """Remove partition directories that a deletion renamed but did not remove before a crash."""
    for path in data_dir.glob(f"*{DELETED_SUFFIX}"):
        if path.is_dir():
            logger.info("removing deleted partition directory %s", path)
            shutil.rmtree(path, ignore_errors=True)


def make_directory(directory: Path, *, sync_parent: bool = True) -> bool:
    """Create the partition directory (its entry in the parent fsynced now, or by the caller's
    first flush when ``sync_parent`` is False); returns whether it was created."""
    if directory.is_dir():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    if sync_parent:
        checkpoint.fsync_dir(directory.parent)
    return True


def is_segment_name(path: Path) -> bool:
    return len(path.stem) == 20 and path.stem.isdigit()


def remove_strays(directory: Path) -> None:
    """Delete half-written checkpoints and index files whose segment is gone."""
    for path in directory.glob("*" + checkpoint.TMP_SUFFIX):
        logger.info("removing leftover %s", path)
        path.unlink(missing_ok=True)
    for pattern in ("*.index", "*.timeindex"):
        for path in directory.glob(pattern):
            if not path.with_suffix(LOG_SUFFIX).exists():
                logger.info("removing orphan index %s", path)
                path.unlink(missing_ok=True)


def load_segments(
    segments: list[Segment], first_dirty: int, recovery_point: int
) -> tuple[list[Segment], bool]:
    """Load trusted segments, recover the rest; drop everything after the first damage.

    Returns the surviving segments and whether any recovery ran.
    """
    kept: list[Segment] = []
    recovered = False
    for i, segment in enumerate(segments):
        if kept and segment.base_offset < kept[-1].next_offset:
            logger.warning("%s overlaps the previous segment; dropping it and what follows", segment.log_path)
            delete_all(segments[i:])
            break
        needs_recovery = i >= first_dirty or not segment.load()
        cut = 0
        if needs_recovery:
            recovered = True
            cut = segment.recover(recovery_point - 1 if i == first_dirty else None)
        kept.append(segment)
        if cut:
            delete_all(segments[i + 1 :])
            break
    return kept, recovered


def delete_all(segments: list[Segment]) -> None:
    for segment in segments:
        logger.warning("deleting segment %s after a damaged predecessor", segment.log_path)
        segment.delete()
