"""Retry policies: after a failed attempt, how long until the next one, or give up?

A policy is a pure function of the attempt number and the error (plus a random source for
jitter): it holds no per-job state, so one instance can serve every job. Delays are monotonic
seconds: a retry "in 30 s" does not move when the wall clock is stepped.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol, runtime_checkable

from duetime._validate import (
    DURATION_MOST_S,
    NS_PER_SECOND,
    duration_ns,
    integer,
    positive_number,
)
from duetime.errors import InvalidArgument

__all__ = ["ExponentialBackoff", "FixedBackoff", "NoRetry", "RetryPolicy"]


@runtime_checkable
class RetryPolicy(Protocol):
    """Decides whether and when a failed attempt is tried again."""

    def delay(
        self, attempt: int, error: BaseException, rng: random.Random, previous: float | None
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to give up.

        Args:
            attempt: The attempt that just failed (1 for the first try).
            error: What it raised.
            rng: The scheduler's random source (seeded schedulers retry reproducibly).
            previous: The delay chosen before this one for the same occurrence, or None
                (decorrelated jitter grows from it).
        """
        ...


@dataclass(frozen=True, slots=True)
class NoRetry:
    """Never retry: a failed attempt is the occurrence's last."""

    def delay(
        self, attempt: int, error: BaseException, rng: random.Random, previous: float | None
    ) -> float | None:
        """Always None."""
        return None


def _retryable(
    retry_on: type[BaseException] | tuple[type[BaseException], ...], error: BaseException
) -> bool:
    return isinstance(error, retry_on)


def _check_retry_on(value: object) -> tuple[type[BaseException], ...]:
    if isinstance(value, type):
        value = (value,)
    if not isinstance(value, tuple) or not value:
        raise TypeError(f"retry_on must be an exception class or a tuple of them, got {value!r}")
    for item in value:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(
                f"retry_on must contain only exception classes, got {item!r} in {value!r}"
            )
    return value


@dataclass(frozen=True, slots=True)
class FixedBackoff:
    """Retry after each delay in a list, then give up.

    Args:
        delays: Seconds (or timedeltas) to wait before retry 1, 2, ...; ``[5, 30, 300]`` means up
            to three retries (four attempts in all).
        retry_on: Exception classes worth retrying; others fail at once.
    """

    delays: Sequence[float | int | timedelta]
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = (Exception,)
    _seconds: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.delays, (str, bytes)) or not isinstance(self.delays, Sequence):
            raise TypeError(f"delays must be a sequence of seconds, got {self.delays!r}")
        seconds = tuple(
            duration_ns(f"delays[{i}]", d) / NS_PER_SECOND for i, d in enumerate(self.delays)
        )
        object.__setattr__(self, "delays", tuple(self.delays))
        object.__setattr__(self, "_seconds", seconds)
        object.__setattr__(self, "retry_on", _check_retry_on(self.retry_on))

    def delay(
        self, attempt: int, error: BaseException, rng: random.Random, previous: float | None
    ) -> float | None:
        """The attempt-th delay, or None when the list is used up or the error is not retried."""
        if not _retryable(self.retry_on, error) or attempt > len(self._seconds):
            return None
        return self._seconds[attempt - 1]


Jitter = Literal["full", "equal", "decorrelated"]


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Retry with exponentially growing delays, capped, optionally jittered.

    The un-jittered delay before retry n is ``min(cap, base * factor ** (n - 1))``. Jitter
    spreads retries of many failing jobs so they do not hammer a recovering service in lockstep
    (see the AWS Architecture Blog's "Exponential Backoff And Jitter"):

    * ``"full"``: uniform in ``[0, d]``;
    * ``"equal"``: ``d / 2`` plus uniform in ``[0, d / 2]``;
    * ``"decorrelated"``: uniform in ``[base, min(cap, previous * 3)]``, always within
      ``[base, cap]``;
    * ``None``: exactly ``d``.

    Args:
        base: First delay in seconds (> 0).
        factor: Growth per retry (>= 1).
        cap: Largest delay in seconds (>= base).
        max_attempts: Attempts in all, the first try included (>= 1): 5 means up to 4 retries.
        jitter: ``"full"``, ``"equal"``, ``"decorrelated"`` or None.
        retry_on: Exception classes worth retrying; others fail at once.
    """

    base: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    max_attempts: int = 5
    jitter: Jitter | None = "full"
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        for name in ("base", "factor", "cap"):
            positive_number(name, getattr(self, name))
        if self.factor < 1:
            raise InvalidArgument(f"factor must be at least 1, got {self.factor!r}")
        if self.cap < self.base:
            raise InvalidArgument(f"cap must be at least base ({self.base!r}), got {self.cap!r}")
        if self.cap > DURATION_MOST_S:
            raise InvalidArgument(
                f"cap must be at most a thousand years ({DURATION_MOST_S} seconds), "
                f"got {self.cap!r}"
            )
        integer("max_attempts", self.max_attempts)
        if self.max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, got {self.max_attempts!r}")
        if self.jitter not in (None, "full", "equal", "decorrelated"):
            raise InvalidArgument(
                f"jitter must be 'full', 'equal', 'decorrelated' or None, got {self.jitter!r}"
            )
        object.__setattr__(self, "retry_on", _check_retry_on(self.retry_on))

    def raw_delay(self, attempt: int) -> float:
        """The un-jittered delay after failed attempt ``attempt``, in seconds."""
        # Compute in log space past the cap so huge attempt numbers cannot overflow a float.
        exponent = attempt - 1
        if self.factor > 1 and exponent * math.log(self.factor) > math.log(self.cap / self.base):
            return float(self.cap)
        return float(min(self.cap, self.base * self.factor**exponent))

    def delay(
        self, attempt: int, error: BaseException, rng: random.Random, previous: float | None
    ) -> float | None:
        """The jittered delay after failed attempt ``attempt``, or None to give up."""
        if attempt >= self.max_attempts or not _retryable(self.retry_on, error):
            return None
        d = self.raw_delay(attempt)
        if self.jitter == "full":
            return rng.uniform(0.0, d)
        if self.jitter == "equal":
            return d / 2 + rng.uniform(0.0, d / 2)
        if self.jitter == "decorrelated":
            upper = min(self.cap, (previous if previous is not None else self.base) * 3)
            return min(self.cap, max(self.base, rng.uniform(self.base, max(self.base, upper))))
        return d
