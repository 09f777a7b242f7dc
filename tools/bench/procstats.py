"""CPU seconds and memory of a broker process, read from /proc (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live children, plus what its reaped children used (a
    PostgreSQL postmaster and its backends, which live as long as their connections)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        this = int(stat.parent.name)
        if this == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if this == pid:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime: reaped children
    return total / CLOCK_TICKS
