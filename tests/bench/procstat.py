"""/proc/PID/stat read as the benchmarks read it (Linux; the process on this machine)."""

from __future__ import annotations

import os


def stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, ppid, ..., utime at 11,
    stime at 12, the reaped children's cutime and cstime at 13 and 14."""
    with open(f"/proc/{pid}/stat") as stat_file:
        stat = stat_file.read()
    return stat[stat.rindex(")") + 2 :].split()


def cpu_seconds(pid: int | str) -> float:
    """The process's own CPU seconds so far (utime + stime)."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
