"""The scheduling rules as pure functions: given a job's facts, an occurrence and the time, what
changes.

Nothing here reads a clock, takes a lock, touches a queue or a store, logs or emits: every input is
an argument (times are integer nanoseconds, the random source is passed in) and every answer is a
value. The engine asks these functions and applies their answers through the store, so each rule
is written once, is the same for every way of driving time (stepping by hand, the thread runner,
the asyncio runner) and for every store, and can be tested on its own (tests/test_policy.py).

The rules:

* ``overlap``: may an occurrence start while a run of the same job is going?
* ``plan_misfire``: does a late regular occurrence of a recurring job run, and which is next?
* ``jittered``: the due time of an occurrence with jitter (never accumulating).
* ``retry_delay``: after a failed attempt, the retry policy's delay, or why there is none.
* ``dead_letter``: does a dead occurrence put its job on the dead-letter list?
* ``resting_state``: the state of a job whose pending work changed.
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from duetime.job import JobState, Misfire, Overlap
from duetime.recurrence import SKIP_COUNT_LIMIT, Env, Recurrence
from duetime.retry import RetryPolicy

# The longest retry delay, in seconds: a thousand years, as every duration duetime takes
# (_validate.DURATION_MOST_S; this module imports only the layers under it).
_DELAY_MOST_S = 1000 * 365 * 86_400

__all__ = [
    "MisfirePlan",
    "Verdict",
    "dead_letter",
    "jittered",
    "overlap",
    "plan_misfire",
    "resting_state",
    "retry_delay",
]


class Verdict(enum.Enum):
    """What becomes of an occurrence that meets a run of its job still going."""

    #: It starts (nothing is running, or ``Overlap.ALLOW``).
    START = "start"
    #: It is dropped and reported (``Overlap.SKIP``, a regular occurrence of a recurring job).
    SKIP = "previous run still going"
    #: It is dropped into the one run already held back (``Overlap.QUEUE``: no backlog grows).
    COALESCE = "coalesced into the held-back run"
    #: It waits and starts when the running one ends.
    HOLD = "hold"


def overlap(running: int, policy: Overlap, *, recurring_regular: bool, has_held: bool) -> Verdict:
    """May an occurrence start while ``running`` runs of its job are going?

    Args:
        running: Runs of the job going now.
        policy: The job's overlap policy.
        recurring_regular: The occurrence is a regular one of a recurring job (not a one-shot's,
            a retry, a ``trigger()`` or a held-back run).
        has_held: A run of the job is already held back.

    Only a recurring job's regular occurrences are ever skipped or coalesced: a one-shot's own
    run, a retry or a ``trigger()`` always waits (a one-shot runs late rather than never).
    """
    if not running or policy is Overlap.ALLOW:
        return Verdict.START
    if not recurring_regular:
        return Verdict.HOLD
    if policy is Overlap.SKIP:
        return Verdict.SKIP
    return Verdict.COALESCE if has_held else Verdict.HOLD


@dataclass(frozen=True, slots=True)
class MisfirePlan:
    """The misfire policy's answer for a regular occurrence of a recurring job.

    Attributes:
        run: Whether this occurrence runs.
        next_base: The next regular occurrence to queue now (un-jittered, the recurrence's
            timebase), or None: none, or (fixed delay) it is computed when this run finishes.
        missed: Occurrences coalesced or skipped, to report (0: nothing to report).
        exact: Whether ``missed`` is exact (False: a lower bound past ``SKIP_COUNT_LIMIT``).
        catchup: Whether the job is catching up a ``RUN_ALL`` backlog after this one.
    """

    run: bool
    next_base: int | None
    missed: int
    exact: bool
    catchup: bool


def plan_misfire(
    trigger: Recurrence,
    base: int,
    late: int,
    now: int,
    *,
    grace: int,
    policy: Misfire,
    catching_up: bool,
    env: Env,
) -> MisfirePlan:
    """Apply the misfire policy to a regular occurrence of a recurring job.

    Args:
        trigger: The job's recurrence.
        base: The occurrence's un-jittered due time (nanoseconds, the trigger's timebase).
        late: How late it starts (nanoseconds).
        now: The time now on the trigger's timebase (nanoseconds).
        grace: Lateness (nanoseconds) up to which it has not misfired.
        policy: The job's misfire policy.
        catching_up: The job was catching up a ``RUN_ALL`` backlog.
        env: For the recurrence.

    ``RUN_ALL`` catches up one occurrence at a time, oldest first, as long as the backlog is at
    most ``SKIP_COUNT_LIMIT`` occurrences (measured once per catch-up, not on every late start);
    a larger backlog is coalesced as ``RUN_ONCE`` would and reported as inexact.
    """
    misfired = late > grace
    catchup = catching_up and misfired
    if trigger.after_finish:
        if misfired and policy is Misfire.SKIP:
            nxt, _ = trigger.skip(base, now, env)
            return MisfirePlan(False, nxt, 1, True, catchup)
        return MisfirePlan(True, None, 0, True, catchup)
    skipped = 0
    exact = True
    if not misfired or (policy is Misfire.RUN_ALL and catchup):
        nxt = trigger.next(base, env)
        # The catch-up ends with the backlog: a later misfire (a clock jump a year on) is a
        # backlog of its own, measured and bounded again.
        catchup = catchup and nxt is not None and nxt <= now
    elif policy is Misfire.SKIP:
        # Only the missed ones are dropped: an occurrence no more than grace late is on time,
        # and runs (now, if one is due already).
        nxt, skipped = trigger.skip(base, now - grace - 1, env)
        exact = skipped < SKIP_COUNT_LIMIT
    else:
        nxt, skipped = trigger.skip(base, now, env)
        exact = skipped < SKIP_COUNT_LIMIT
        if policy is Misfire.RUN_ALL and exact:
            nxt = trigger.next(base, env)
            catchup = nxt is not None and nxt <= now
            skipped = 0
    run = not (misfired and policy is Misfire.SKIP)
    if not run:
        skipped += 1  # this occurrence is dropped too
    return MisfirePlan(run, nxt, skipped, exact, catchup)


def jittered(base: int, jitter: int, rng: random.Random) -> int:
    """The due time of an occurrence whose schedule says ``base``: ``base`` plus
    ``uniform(0, jitter)`` nanoseconds. The schedule continues from ``base``, so jitter never
    accumulates."""
    return base + rng.randint(0, jitter) if jitter else base


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    error: BaseException,
    rng: random.Random,
    previous: float | None,
) -> tuple[float | None, str | None, Exception | None]:
    """The delay in seconds before the next attempt; if the policy misbehaved, why there is none.

    Returns:
        ``(delay, None, None)`` to retry; ``(None, None, None)`` when the policy gives up;
        ``(None, why, raised)`` when the policy raised (``raised`` is its exception) or returned
        something that is not a finite number of seconds >= 0 (``raised`` None). The occurrence
        then gives up too: a broken policy must not retry forever or crash a runner.
    """
    try:
        # (Any: a policy of the user's may return what its annotation does not say.)
        delay: Any = policy.delay(attempt, error, rng, previous)
    except Exception as exc:
        return None, f"raised {type(exc).__name__}: {exc}", exc
    if delay is not None:
        if isinstance(delay, timedelta):
            delay = delay.total_seconds()  # (FixedBackoff takes timedeltas: a policy may too)
        try:
            # (A bool is no number of seconds: a policy returning "attempt < 3" meant "retry
            # or not", and True as 1 s retried for ever.)
            valid = (
                not isinstance(delay, bool) and math.isfinite(delay) and 0 <= delay <= _DELAY_MOST_S
            )
        except TypeError:  # not a number at all
            valid = False
        if not valid:
            return None, f"returned {delay!r} (not seconds from 0 to a thousand years)", None
    return delay, None, None


def dead_letter(*, live: bool, recurring: bool, pending: bool, running: int) -> bool:
    """Whether an occurrence whose last attempt failed puts its job on the dead-letter list:
    only a live one-shot job with nothing else pending or running (a recurring job goes on with
    its next occurrence; a cancelled one is gone)."""
    return live and not recurring and not pending and not running


def resting_state(state: JobState, *, running: int, pending: bool, failed: bool) -> JobState | None:
    """The state of a job whose pending work changed; None: unchanged.

    A cancelled job stays cancelled; a job with a run going is RUNNING, one with anything queued
    SCHEDULED, and one with nothing left ends, FAILED if ``failed`` (a one-shot whose occurrence
    died: it is dead-lettered), else COMPLETED (a recurring job whose recurrence ran out ends
    COMPLETED even if its last occurrence died: that one was reported, ``JobDead``, and the job
    went on as DESIGN says, until it had no next occurrence). A paused job stays paused while it
    has anything pending or running, and ends like any other when nothing is left.
    """
    if state is JobState.CANCELLED:
        return None
    if running or pending:
        if state is JobState.PAUSED:
            return None
        new = JobState.RUNNING if running else JobState.SCHEDULED
        return None if new is state else new
    return JobState.FAILED if failed else JobState.COMPLETED
