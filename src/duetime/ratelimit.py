"""Rate limiting: a token bucket that schedules, rather than refuses, work over its rate.

The bucket is kept as a *theoretical arrival time* (the GCRA form of a token bucket) in exact
rational monotonic nanoseconds, so that tokens do not drift (3 a second: the fourth token exists
at 1 s, not at 999 999 999 ns; the 3 001st at 1 000 s). Asking for a token *reserves* one: the
answer is the first whole nanosecond at which that token exists. A job due when the bucket is
empty is therefore queued again for that instant, once, instead of polling; N jobs due together
against a 10/s bucket start 0.1 s apart after the burst, each at its own reserved instant, and
no job is ever dropped.
"""

from __future__ import annotations

import math
import threading
from datetime import timedelta
from fractions import Fraction

from duetime._validate import (
    DURATION_MOST_S,
    NS_PER_SECOND,
    duration_ns,
    integer,
    positive_number,
)
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
        # (Exact: the float rate is a binary fraction, and so is the step.)
        interval = Fraction(per_ns) / Fraction(rate)
        if interval > DURATION_MOST_S * NS_PER_SECOND:
            raise InvalidArgument(
                f"rate must give a token at least every thousand years ({DURATION_MOST_S} "
                f"seconds), got rate={rate!r} per {per!r}"
            )
        self.rate = rate
        self.per = per
        self.burst = burst
        self._interval = interval
        # Tolerance: how far ahead of the steady rate the bucket may run (the burst).
        self._burst = (burst - 1) * interval
        self._tat: Fraction | None = None
        self._lock = threading.Lock()

    @property
    def interval(self) -> float:
        """Seconds between tokens at the steady rate."""
        return float(self._interval / NS_PER_SECOND)

    def reserve(self, now_ns: int) -> int:
        """Take the next token and return the monotonic instant (nanoseconds) it exists: the
        first whole nanosecond at or after it.

        A return value equal to ``now_ns`` means "go now".
        """
        if not isinstance(now_ns, int) or isinstance(now_ns, bool):
            raise TypeError(f"now_ns must be an int (nanoseconds), got {now_ns!r}")
        with self._lock:
            tat = self._tat
            if tat is None or tat < now_ns:
                tat = Fraction(now_ns)
            at = max(now_ns, math.ceil(tat - self._burst))
            self._tat = tat + self._interval
            return at

    def __repr__(self) -> str:
        return f"TokenBucket(rate={self.rate!r}, per={self.per!r}, burst={self.burst!r})"
