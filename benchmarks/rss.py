"""Resident memory of this process, for the benchmarks (Linux /proc, with a fallback)."""

import resource


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise KeyError(field)


def rss_mb() -> float:
    """Current resident set size (VmRSS) in MB; NaN without /proc."""
    try:
        return _status_mb("VmRSS")
    except (OSError, KeyError):
        return float("nan")


def peak_rss_mb() -> float:
    """Resident set high-water mark (VmHWM) in MB; without /proc, ru_maxrss."""
    try:
        return _status_mb("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss() -> float:
    """Resets the high-water mark (``/proc/self/clear_refs``, Linux) and returns
    the current RSS in MB; without /proc, returns the peak so far (ru_maxrss)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_mb("VmRSS")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
