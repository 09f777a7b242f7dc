"""Rate-limited warnings: a flood of bad connections must not become a flood of log lines.

The first ``burst`` occurrences of a kind within an interval are logged; further ones are counted
and summarised on the next line of that kind logged after the interval. Every log of a refusal a
client can provoke (authorization, authentication, rejected records) goes through one of these.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

DEFAULT_INTERVAL_S = 10.0
DEFAULT_BURST = 10


@dataclass
class _Window:
    started: float
    logged: int = 0
    suppressed: int = 0


class RateLimitedLog:
    def __init__(
        self, logger: logging.Logger, interval_s: float = DEFAULT_INTERVAL_S, burst: int = DEFAULT_BURST
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._burst = burst
        self._windows: dict[str, _Window] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` on one line unless ``kind`` already used its burst this interval."""
        self.log(logging.WARNING, kind, message, *args)

    def info(self, kind: str, message: str, *args: object) -> None:
        self.log(logging.INFO, kind, message, *args)

    def log(self, level: int, kind: str, message: str, *args: object) -> None:
        """As :meth:`warning`, at ``level``."""
        now = time.monotonic()
        window = self._windows.get(kind)
        summary = ""
        if window is None or now - window.started >= self._interval_s:
            if window is not None and window.suppressed:
                summary = f" ({window.suppressed} more like this suppressed in the last {now - window.started:.0f}s)"
            window = self._windows[kind] = _Window(now)
        if window.logged >= self._burst:
            window.suppressed += 1
            return
        window.logged += 1
        self._logger.log(level, "%s%s", one_line(message % args if args else message), summary)


def one_line(text: str) -> str:
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())
