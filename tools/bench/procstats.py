"""CPU seconds and memory of a broker process, read from /proc (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    cpu_s: float  # user + system
    rss_mib: float
    peak_rss_mib: float


def usage(pid: int) -> Usage:
    with open(f"/proc/{pid}/stat") as stat:
        # Fields after the command name (which may hold spaces, so split after its closing paren).
        fields = stat.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    memory: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                memory[key] = int(value.split()[0]) / 1024
    return Usage(cpu, memory.get("VmRSS", 0.0), memory.get("VmHWM", 0.0))


def reset_peak(pid: int) -> bool:
    """Restart the peak-RSS watermark (VmHWM) so a workload's own peak can be read after it."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False
