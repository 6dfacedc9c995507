"""The translation of timing state to wall-clock UTC and back, at the store boundary.

In memory, duetime keeps delays in monotonic time: ``After(30)``, fixed-rate and fixed-delay
schedules, retry backoff and the side occurrences (retries, deferrals, ``trigger()`` runs) are
due at a number of nanoseconds on the clock's monotonic axis. That number means nothing after a
restart (the monotonic clock starts again from an arbitrary origin) or on another host. A durable
store therefore records every due time as a UTC instant, and converts with one reading of the
clock taken for the whole change:

============================================  ===============================================
In memory                                      Stored
============================================  ===============================================
a monotonic due time ``m``                     the UTC instant ``m - mono + wall``
a wall-clock due time (``At``, ``Cron``,        the UTC instant itself
``Poisson`` windows)
``FixedRate``: occurrence k at                 the UTC instant of the next occurrence (its
``anchor + k * interval`` (monotonic)          un-jittered base) and the interval; the grid
                                               continues from there: ``base + interval``
``FixedDelay``: due ``interval`` after a       the UTC instant of the next run, or none while
run finishes                                   a run is going (it is computed at its finish)
``After(30)``                                  the UTC instant it falls due
a retry / deferral / ``trigger()`` run         its kind, attempt and UTC due instant
a run held back (``Overlap.QUEUE``) or         its kind and no due time: it is queued again,
waiting for a ``max_concurrent`` slot          due now, when the store is opened
jitter                                         the jittered UTC due instant and the
                                               un-jittered base (jitter never accumulates)
============================================  ===============================================

Loading reverses it with the reading at load time: a due time already in the past is late, and
the job's misfire policy decides what happens to it. Monotonic time elapsed while nothing ran is
thereby replaced by wall-clock time, which is what a restart means: "30 seconds from now" is kept
as the instant it named. Both directions are exact integer arithmetic, so saving and loading with
the same reading returns the same nanosecond.
"""

from __future__ import annotations

from duetime.recurrence import MONOTONIC, WALL

__all__ = ["from_utc", "to_utc"]


def to_utc(due: int, timebase: int, wall: int, mono: int) -> int:
    """A due time in nanoseconds of ``timebase`` as UTC epoch nanoseconds, given one clock
    reading ``(wall, mono)`` (the clock's ``time_ns()`` and ``monotonic_ns()``)."""
    if timebase == WALL:
        return due
    if timebase != MONOTONIC:
        raise ValueError(f"timebase must be WALL or MONOTONIC, got {timebase!r}")
    return due - mono + wall


def from_utc(utc: int, timebase: int, wall: int, mono: int) -> int:
    """The inverse of ``to_utc`` for the same reading: UTC epoch nanoseconds as a due time in
    nanoseconds of ``timebase``."""
    if timebase == WALL:
        return utc
    if timebase != MONOTONIC:
        raise ValueError(f"timebase must be WALL or MONOTONIC, got {timebase!r}")
    return utc - wall + mono
