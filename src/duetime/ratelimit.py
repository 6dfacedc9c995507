"""Rate limiting: a token bucket that schedules, rather than refuses, work over its rate.

The bucket is kept as a *theoretical arrival time* (the GCRA form of a token bucket) in integer
monotonic nanoseconds. Asking for a token *reserves* one: the answer is the exact instant at which
that token exists. A job due when the bucket is empty is therefore queued again for that instant,
once, instead of polling; N jobs due together against a 10/s bucket start 0.1 s apart after the
burst, each at its own reserved instant, and no job is ever dropped.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from duetime._validate import NS_PER_SECOND, duration_ns, integer, positive_number
from duetime.errors import InvalidArgument

__all__ = ["TokenBucket"]


class TokenBucket:
    """Allow ``rate`` starts per ``per`` seconds, with bursts of up to ``burst``.

    One bucket may be shared by many jobs (``limiter=bucket``); it is thread-safe. Use it with
    one scheduler (or several on the same clock): reservations are instants of that clock's
    monotonic time.

    Args:
        rate: Tokens added per ``per`` seconds (> 0).
        per: The period ``rate`` is counted over, in seconds or as a timedelta (> 0).
        burst: How many tokens the bucket holds when full (>= 1). Default: ``max(1, rate)``
            rounded down.
    """

    __slots__ = ("_burst", "_interval", "_lock", "_tat", "burst", "per", "rate")

    def __init__(self, rate: float, per: float | timedelta = 1.0, burst: int | None = None) -> None:
        positive_number("rate", rate)
        per_ns = duration_ns("per", per, allow_zero=False)
        if burst is None:
            burst = max(1, int(rate))
        integer("burst", burst)
        if burst < 1:
            raise InvalidArgument(f"burst must be at least 1, got {burst!r}")
        self.rate = rate
        self.per = per
        self.burst = burst
        self._interval = max(1, round(per_ns / rate))
        # Tolerance: how far ahead of the steady rate the bucket may run (the burst).
        self._burst = (burst - 1) * self._interval
        self._tat: int | None = None
        self._lock = threading.Lock()

    @property
    def interval(self) -> float:
        """Seconds between tokens at the steady rate."""
        return self._interval / NS_PER_SECOND

    def reserve(self, now_ns: int) -> int:
        """Take the next token and return the monotonic instant (nanoseconds) it exists.

        A return value equal to ``now_ns`` means "go now".
        """
        with self._lock:
            tat = now_ns if self._tat is None or self._tat < now_ns else self._tat
            at = max(now_ns, tat - self._burst)
            self._tat = tat + self._interval
            return at

    def __repr__(self) -> str:
        return f"TokenBucket(rate={self.rate!r}, per={self.per!r}, burst={self.burst!r})"
