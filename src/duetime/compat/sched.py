"""A drop-in for the standard library's ``sched.scheduler``, built on ``EventQueue``.

Same constructor, same methods, same ``Event`` named tuples, same ordering. Two differences, both
the point of using it:

* ``cancel`` is O(1) (lazy deletion) where the standard library's is an O(n) list removal plus a
  re-heapify.
* With the default ``delayfunc``, a blocking ``run()`` sleeps on a condition variable, so another
  thread that ``enter``s an earlier event or cancels one wakes it at once. The standard library's
  ``run()`` sits in ``time.sleep`` until the old head is due.

Equal ``(time, priority)`` events run in the order they were entered (FIFO), as in the standard
library. Usage::

    from duetime.compat import sched
    s = sched.scheduler()
    s.enter(5, 1, print, ("hello",))
    s.run()
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from duetime.clock import real_monotonic, real_sleep
from duetime.core import EventQueue

__all__ = ["Event", "scheduler"]

_sentinel: Any = object()


class Event(NamedTuple):
    """A queued call, field for field the standard library's ``sched.Event``."""

    time: float
    priority: Any
    sequence: int
    action: Callable[..., Any]
    argument: tuple[Any, ...]
    kwargs: dict[str, Any]


class scheduler:
    """``sched.scheduler`` with O(1) cancel and a ``run()`` that other threads can wake.

    Args:
        timefunc: Returns the current time (any unit). Default ``time.monotonic``.
        delayfunc: Sleeps for a given time in ``timefunc``'s unit. With the default
            (``time.sleep``), waits use a condition variable instead, which ``enter``,
            ``enterabs`` and ``cancel`` from other threads interrupt.
    """

    def __init__(
        self,
        timefunc: Callable[[], float] = real_monotonic,
        delayfunc: Callable[[float], object] = real_sleep,
    ) -> None:
        self.timefunc = timefunc
        self.delayfunc = delayfunc
        self._queue: EventQueue[int] = EventQueue()
        self._events: dict[int, Event] = {}
        self._sequence = itertools.count()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._wakeable = delayfunc is real_sleep

    def enterabs(
        self,
        time: float,
        priority: Any,
        action: Callable[..., Any],
        argument: tuple[Any, ...] = (),
        kwargs: dict[str, Any] = _sentinel,
    ) -> Event:
        """Queue ``action(*argument, **kwargs)`` at absolute ``time``; returns its Event."""
        if kwargs is _sentinel:
            kwargs = {}
        if time != time:  # noqa: PLR0124 (NaN: it would run at once, or never)
            raise ValueError(f"time must not be NaN, got {time!r}")
        with self._lock:
            seq = next(self._sequence)
            event = Event(time, priority, seq, action, argument, kwargs)
            head = self._queue.head()
            # (time, priority) is the queue's due, compared as the standard library compares
            # its events: a priority may be anything that orders (a tuple, a str, None, a
            # Decimal), not only the numbers EventQueue's own priority takes. Pushed first:
            # a refusal (a time or priority that does not compare with those queued) leaves
            # nothing behind.
            key: Any = (time, priority)
            try:
                self._queue.push(seq, key)
            except TypeError:
                raise TypeError(
                    f"time and priority must compare with those queued (as in sched), got "
                    f"time={time!r}, priority={priority!r}"
                ) from None
            self._events[seq] = event
            if self._wakeable and (head is None or key < head[0]):
                self._cond.notify_all()
        return event

    def enter(
        self,
        delay: float,
        priority: Any,
        action: Callable[..., Any],
        argument: tuple[Any, ...] = (),
        kwargs: dict[str, Any] = _sentinel,
    ) -> Event:
        """Queue ``action`` ``delay`` time units from now; returns its Event."""
        return self.enterabs(self.timefunc() + delay, priority, action, argument, kwargs)

    def cancel(self, event: Event) -> None:
        """Remove a queued event in O(1). Raises ValueError if it is not queued."""
        with self._lock:
            try:
                # (As the standard library: an equal tuple names the event too.)
                seq = event[2]
                queued = self._events.get(seq)
            except (TypeError, IndexError, KeyError):
                queued = None
            if queued is None or queued != event:
                raise ValueError(f"event is not in the queue: {event!r}")
            del self._events[seq]
            self._queue.cancel(seq)
            if self._wakeable:
                self._cond.notify_all()

    def empty(self) -> bool:
        """Whether no event is queued."""
        with self._lock:
            return not self._events

    @property
    def queue(self) -> list[Event]:
        """The queued events in the order they will run."""
        with self._lock:
            return [self._events[e[3]] for e in self._queue.entries()]

    def run(self, blocking: bool = True) -> float | None:
        """Run events as they come due.

        Args:
            blocking: If False, run what is due now and return the delay until the next event
                (or None when the queue is empty) without waiting.
        """
        lock = self._lock
        queue = self._queue
        timefunc = self.timefunc
        delayfunc = self.delayfunc
        while True:
            with lock:
                head = queue.head()
                if head is None:
                    return None
                now = timefunc()
                key: Any = head[0]
                due: float = key[0]
                if due > now:
                    if not blocking:
                        return due - now
                    if self._wakeable:
                        self._cond.wait(due - now)
                        continue
                    event = None
                else:
                    queue.pop()
                    event = self._events.pop(head[3])
            if event is None:
                delayfunc(due - now)
            else:
                event.action(*event.argument, **event.kwargs)
                delayfunc(0)  # let other threads run, as the standard library does
