"""FixedRate exactness, Poisson arrivals and windows, jitter."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from datetime import datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from scipy import stats as sps

from duetime import (
    After,
    FakeClock,
    FixedDelay,
    FixedRate,
    InvalidArgument,
    Poisson,
    Scheduler,
    Window,
    current_run,
)
from duetime.clock import WallAxis
from duetime.recurrence import Env
from duetime.testing import FAKE_START

BERLIN = ZoneInfo("Europe/Berlin")


def env(seed: int = 0, start: datetime = FAKE_START, tz: str = "Europe/Berlin") -> Env:
    return Env(FakeClock(start=start), random.Random(seed), ZoneInfo(tz))


def test_fixed_rate_is_computed_not_accumulated() -> None:
    rate = FixedRate(seconds=0.1)
    e = env()
    anchor = rate.first(e)
    assert anchor is not None
    due = anchor
    for _ in range(1_000_000):
        nxt = rate.next(due, e)
        assert nxt is not None
        due = nxt
    assert due == anchor + 100_000 * 10**9


def test_fixed_rate_skip_closed_form() -> None:
    rate = FixedRate(seconds=10)
    e = env()
    assert rate.skip(0, 5 * 10**9, e) == (10 * 10**9, 0)
    assert rate.skip(0, 35 * 10**9, e) == (40 * 10**9, 3)
    assert rate.skip(0, 40 * 10**9, e) == (50 * 10**9, 4)


def test_fixed_rate_ignores_dst() -> None:
    # Elapsed time: across Berlin's spring-forward night a 1 h rate stays 1 h apart in real time.
    start = datetime(2026, 3, 28, 23, 0, tzinfo=BERLIN)
    clock = FakeClock(start=start)
    s = Scheduler(clock=clock, tz="Europe/Berlin")
    seen: list[datetime] = []
    s.schedule(lambda: seen.append(clock.now()), FixedRate(3600))
    s.run_for(timedelta(hours=5))
    gaps = {b - a for a, b in itertools.pairwise(seen)}
    assert gaps == {timedelta(hours=1)} and len(seen) == 5
    assert [t.astimezone(BERLIN).hour for t in seen] == [0, 1, 3, 4, 5]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of per_day, rate or mean_interval"),
        ({"per_day": 1, "rate": 1}, "exactly one"),
        ({"per_day": 0}, "per_day must be a positive finite number"),
        ({"rate": -1.0}, "rate must be a positive"),
        ({"mean_interval": float("nan")}, "mean_interval must be a positive finite"),
        ({"per_day": float("inf")}, "per_day must be a positive finite"),
        ({"per_day": 5, "window": []}, "window must not be an empty list"),
    ],
)
def test_poisson_bad_input(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Poisson(**kwargs)  # type: ignore[arg-type]


def test_poisson_type_errors() -> None:
    with pytest.raises(TypeError, match="per_day must be a number"):
        Poisson(per_day="300")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="window must be a Window"):
        Poisson(per_day=3, window="09:00-18:00")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("09:00", "09:00"), "window is empty"),
        (("25:00", "26:00"), "not a time of day"),
        (("9am", "5pm"), "must be 'HH:MM'"),
        (("24:00", "01:00"), "start must be before 24:00"),
        # (The zone of an aware time was dropped without a word: 09:00 Tokyo opened 09:00 UTC.)
        (
            (time(9, tzinfo=ZoneInfo("Asia/Tokyo")), "18:00"),
            r"start must be a time of day in whole seconds without a zone \(give the zone as "
            r"Window\(\.\.\., tz=\.\.\.\)\)",
        ),
        (("09:00", time(17, 59, 59, 500_000)), "end must be a time of day in whole seconds"),
    ],
)
def test_window_bad_input(args: tuple[Any, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Window(*args)


def test_window_days_and_zone_validation() -> None:
    with pytest.raises(InvalidArgument, match="days must be like 'mon-fri'"):
        Window("09:00", "17:00", days="weekdays")
    with pytest.raises(InvalidArgument, match="days must not be empty"):
        Window("09:00", "17:00", days=[])
    with pytest.raises(InvalidArgument, match="weekday numbers 0-6"):
        Window("09:00", "17:00", days=[7])
    with pytest.raises(InvalidArgument, match="not a known time zone"):
        Window("09:00", "17:00", tz="Nowhere/Land")
    assert Window("09:00", "17:00", days="fri-mon")._days == {4, 5, 6, 0}
    assert Window(time(9), time(17), days=[0, 2]).nominal_seconds == 8 * 3600


def test_window_intervals_overnight_and_dst() -> None:
    night = Window("22:00", "06:00", days="fri", tz="Europe/Berlin")
    after = int(datetime(2026, 3, 26, tzinfo=BERLIN).timestamp())
    it = night.intervals(after, BERLIN)
    a, b = next(it)
    assert datetime.fromtimestamp(a, BERLIN).isoformat() == "2026-03-27T22:00:00+01:00"
    assert b - a == 8 * 3600
    # The night of the spring-forward (Sat 28 -> Sun 29 March) is an hour shorter.
    sat = Window("22:00", "06:00", days="sat", tz="Europe/Berlin")
    a, b = next(sat.intervals(after, BERLIN))
    assert b - a == 7 * 3600


@pytest.mark.parametrize(
    ("start", "end", "day", "hours"),
    [
        # Spring forward, 02:00 -> 03:00 on 29 March: the hour that does not exist is not open.
        ("01:00", "02:30", (3, 29), [("01:00+0100", "03:00+0200")]),
        ("02:15", "02:45", (3, 29), []),
        ("02:30", "04:00", (3, 29), [("03:00+0200", "04:00+0200")]),
        # Fall back, 03:00 -> 02:00 on 25 October: both passes of what the window holds.
        ("01:00", "02:30", (10, 25), [("01:00+0200", "02:30+0200"), ("02:00+0100", "02:30+0100")]),
        ("02:30", "04:00", (10, 25), [("02:30+0200", "02:00+0100"), ("02:30+0100", "04:00+0100")]),
    ],
)
def test_window_openings_hold_exactly_its_local_times_on_dst_days(
    start: str, end: str, day: tuple[int, int], hours: list[tuple[str, str]]
) -> None:
    # Both ends were read by PEP 495 fold=0: on the spring day "to 02:30" was open until 03:30
    # (03:00-03:29 fired, outside the window), "02:15-02:45" at 03:15-03:45; on the autumn day
    # "from 02:30" opened 02:00-02:29 of the second pass, and "to 02:30" missed it.
    after = int(datetime(2026, *day, tzinfo=BERLIN).timestamp())
    window = Window(start, end, tz="Europe/Berlin")
    found = []
    for a, b in window.intervals(after, BERLIN):
        if a >= after + 86400:
            break
        found.append(tuple(datetime.fromtimestamp(t, BERLIN).strftime("%H:%M%z") for t in (a, b)))
    assert found == hours


@pytest.mark.parametrize(
    ("start", "end", "month", "day"), [("01:00", "02:30", 3, 28), ("02:30", "04:00", 10, 24)]
)
def test_poisson_in_a_window_across_dst_days_never_fires_outside_it(
    start: str, end: str, month: int, day: int
) -> None:
    clock = FakeClock(start=datetime(2026, month, day, tzinfo=timezone.utc))
    s = Scheduler(clock=clock, tz="Europe/Berlin", rng=random.Random(2))
    seen: list[datetime] = []
    s.schedule(
        lambda: seen.append(clock.now().astimezone(BERLIN)),
        Poisson(per_day=2000, window=Window(start, end)),
    )
    s.run_for(3 * 86400)
    low, high = time.fromisoformat(start), time.fromisoformat(end)
    assert len(seen) > 3000
    assert [t for t in seen if not low <= t.time() < high] == []


def simulate(rec: Poisson, days: int, seed: int, start: datetime) -> list[int]:
    e = env(seed, start)
    if rec.timebase:  # monotonic: the fake monotonic clock starts at 0
        end = days * 86400 * 10**9
    else:
        end = int((start + timedelta(days=days)).timestamp()) * 10**9
    out: list[int] = []
    due = rec.first(e)
    while due is not None and due < end:
        out.append(due)
        due = rec.next(due, e)
    return out


def test_poisson_office_hours_statistics() -> None:
    """1 000 simulated days of ~300 a day in office hours, Monday to Friday."""
    start = datetime(2026, 1, 5, tzinfo=BERLIN)  # a Monday, 00:00
    window = Window("09:00", "18:00", days="mon-fri")
    fires = simulate(Poisson(per_day=300, window=window), 1000, seed=7, start=start)
    local = [datetime.fromtimestamp(f / 1e9, BERLIN) for f in fires]

    # Nothing outside the window.
    assert all(t.weekday() < 5 and 9 <= t.hour < 18 for t in local)

    # The daily target holds (within 3 %), with Poisson variance (dispersion ~ 1).
    per_day = Counter(t.date() for t in local)
    open_days = [start.date() + timedelta(days=d) for d in range(1000)]
    counts = [per_day.get(d, 0) for d in open_days if d.weekday() < 5]
    mean = statistics.fmean(counts)
    assert abs(mean - 300) / 300 < 0.03
    dispersion = statistics.variance(counts) / mean
    assert 0.8 < dispersion < 1.2

    # No bunching at the opening: the first 1 % of each window holds ~1 % of the fires.
    first_pct = sum(1 for t in local if (t.hour - 9) * 3600 + t.minute * 60 + t.second < 324)
    share = first_pct / len(local)
    sigma = math.sqrt(0.01 * 0.99 / len(local))
    assert abs(share - 0.01) < 5 * sigma

    # Gaps measured in open time are exponential (KS test against the rate).
    def open_seconds(t: datetime) -> float:
        day = (t.date() - start.date()).days
        weeks, wd = divmod(day, 7)
        before = weeks * 5 + min(wd, 5)
        return (
            before * 9 * 3600
            + (t - t.replace(hour=9, minute=0, second=0, microsecond=0)).total_seconds()
        )

    opens = [open_seconds(t) for t in local]
    gaps = [b - a for a, b in itertools.pairwise(opens)]
    rate = 300 / (9 * 3600)
    assert sps.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > 0.001


def test_poisson_without_window_is_exponential_in_elapsed_time() -> None:
    rec = Poisson(mean_interval=60)
    fires = simulate(rec, 50, seed=3, start=FAKE_START)
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(fires)]
    assert abs(statistics.fmean(gaps) - 60) < 2
    assert sps.kstest(gaps, "expon", args=(0, 60)).pvalue > 0.001


def test_poisson_takes_a_timedelta_mean_interval() -> None:
    # (Refused with a TypeError: every other duration parameter takes a timedelta.)
    rec = Poisson(mean_interval=timedelta(minutes=1))
    assert rec == Poisson(mean_interval=60)
    assert simulate(rec, 5, seed=3, start=FAKE_START) == simulate(
        Poisson(mean_interval=60), 5, seed=3, start=FAKE_START
    )


def test_several_windows_and_overnight() -> None:
    windows = [Window("08:00", "10:00"), Window("22:00", "02:00")]
    start = datetime(2026, 1, 5, tzinfo=timezone.utc)
    fires = simulate(Poisson(per_day=600, window=windows), 60, seed=1, start=start)
    hours = Counter(datetime.fromtimestamp(f / 1e9, BERLIN).hour for f in fires)
    assert set(hours) == {8, 9, 22, 23, 0, 1}
    assert abs(len(fires) / 60 - 600) / 600 < 0.05


@pytest.mark.parametrize(
    "windows",
    [
        [Window("00:00", "24:00")],
        [Window("00:00", "12:00"), Window("12:00", "24:00")],
        [Window("22:00", "10:00"), Window("10:00", "22:00")],
    ],
    ids=["whole day", "two halves", "overnight and day"],
)
def test_windows_open_around_the_clock_are_a_steady_rate(windows: list[Window]) -> None:
    # Openings that touch every day join into one stretch without end: each next time is still
    # found at once, and the rate is the whole day's.
    start = datetime(2026, 1, 5, tzinfo=timezone.utc)
    rec = Poisson(per_day=300, window=windows)
    assert rec.rate_per_second == pytest.approx(300 / 86400)
    fires = simulate(rec, 20, seed=5, start=start)
    assert abs(len(fires) / 20 - 300) / 300 < 0.1


@pytest.mark.parametrize(
    "windows",
    [
        [Window("09:00", "12:00"), Window("11:00", "14:00")],
        [Window("09:00", "14:00"), Window("09:00", "14:00")],
        [Window("09:00", "14:00", days="mon-fri"), Window("10:00", "11:00", days="mon")],
        [Window("09:00", "12:00", tz="Europe/Berlin"), Window("11:00", "14:00")],
    ],
    ids=["overlapping", "the same twice", "one inside another", "one with a zone"],
)
def test_overlapping_windows_count_their_common_time_once(windows: list[Window]) -> None:
    # Their union is 09:00-14:00, open 5 h: per_day=300 is 300 in those 5 h, not fewer because
    # an hour was counted twice.
    rec = Poisson(per_day=300, window=windows)
    assert rec.rate_per_second == pytest.approx(300 / (5 * 3600))
    start = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday
    fires = simulate(rec, 40, seed=2, start=start)
    days = Counter(datetime.fromtimestamp(f / 1e9, timezone.utc).date() for f in fires)
    assert abs(statistics.fmean(days.values()) - 300) / 300 < 0.05


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_a_window_without_a_zone_beside_one_with_a_zone_keeps_the_daily_target(tz: str) -> None:
    # The zoneless window is in the scheduler's zone: in UTC the two are apart (16 h open), in
    # Tokyo the same hours (8 h): per_day=100 holds in both.
    rec = Poisson(
        per_day=100, window=[Window("09:00", "17:00"), Window("09:00", "17:00", tz="Asia/Tokyo")]
    )
    e = env(3, datetime(2026, 1, 5, tzinfo=timezone.utc), tz=tz)
    end = int(datetime(2026, 3, 6, tzinfo=timezone.utc).timestamp()) * 10**9  # 60 days
    count = 0
    due = rec.first(e)
    while due is not None and due < end:
        count += 1
        due = rec.next(due, e)
    assert abs(count / 60 - 100) / 100 < 0.05


def test_a_rate_whose_mean_gap_is_a_thousand_years_of_calendar_time_is_refused() -> None:
    # A minute a day at one arrival per 10**10 open seconds: 460 000 years between arrivals.
    with pytest.raises(InvalidArgument, match=r"of calendar time \(open 0.07% of it\)"):
        Poisson(mean_interval=10**10, window=Window("09:00", "09:01"))


def test_poisson_is_reproducible_with_a_seed() -> None:
    rec = Poisson(per_day=300, window=Window("09:00", "18:00"))
    start = datetime(2026, 1, 5, tzinfo=BERLIN)
    assert simulate(rec, 3, 42, start) == simulate(rec, 3, 42, start)
    assert simulate(rec, 3, 42, start) != simulate(rec, 3, 43, start)


def test_poisson_in_a_scheduler() -> None:
    clock = FakeClock(start=datetime(2026, 1, 5, tzinfo=BERLIN))
    s = Scheduler(clock=clock, tz="Europe/Berlin", rng=random.Random(5))
    seen: list[datetime] = []
    s.schedule(
        lambda: seen.append(clock.now()), Poisson(per_day=100, window=Window("09:00", "12:00"))
    )
    s.run_for(timedelta(days=7))
    assert 500 < len(seen) < 900
    assert all(9 <= t.astimezone(BERLIN).hour < 12 for t in seen)


def test_jitter_delays_each_occurrence_without_accumulating() -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, rng=random.Random(11))
    lags: list[float] = []
    bases: list[datetime] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        bases.append(run.scheduled_time)
        lags.append((clock.now() - run.scheduled_time).total_seconds())

    s.schedule(job, FixedRate(60), jitter=10)
    s.run_for(timedelta(hours=20, seconds=30))
    assert bases == [FAKE_START + timedelta(minutes=k) for k in range(1, 1201)]
    assert all(0 <= lag <= 10 for lag in lags)
    assert 4.5 < statistics.fmean(lags) < 5.5  # uniform(0, 10)
    assert len(set(lags)) > 1000


@pytest.mark.parametrize(
    ("rate", "seconds", "text"),
    [
        (FixedRate(minutes=5), 300, "FixedRate(minutes=5)"),
        (FixedRate(hours=1, minutes=30), 5400, "FixedRate(hours=1, minutes=30)"),
        (FixedRate(300), 300, "FixedRate(300)"),
        (FixedRate(timedelta(minutes=5)), 300, "FixedRate(datetime.timedelta(seconds=300))"),
        (FixedRate(days=1, milliseconds=1), 86400.001, "FixedRate(days=1, milliseconds=1)"),
        (FixedRate(seconds=0.1), 0.1, "FixedRate(seconds=0.1)"),
        # (Counted in units, not seconds: a day in microseconds is well within the bound.)
        (FixedRate(microseconds=10**11), 100_000, "FixedRate(microseconds=100000000000)"),
        (After(milliseconds=10**11), 100_000_000, "After(milliseconds=100000000000)"),
        (FixedDelay(minutes=2, initial_delay=3), 120, "FixedDelay(minutes=2, initial_delay=3)"),
        (FixedDelay(weeks=1), 604800, "FixedDelay(weeks=1)"),
        (After(minutes=5), 300, "After(minutes=5)"),
        (After(30), 30, "After(30)"),
        (After(0), 0, "After(0)"),
    ],
)
def test_intervals_take_timedeltas_keywords_and_read_back(
    rate: FixedRate | FixedDelay | After, seconds: float, text: str
) -> None:
    import datetime as datetime_module  # for eval() of the repr

    assert rate.seconds == seconds
    assert repr(rate) == text
    names = {"FixedRate": FixedRate, "FixedDelay": FixedDelay, "After": After}
    again = eval(text, {**names, "datetime": datetime_module})
    assert again == rate and hash(again) == hash(rate)


def test_keyword_and_positional_intervals_schedule_alike() -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock)
    ran: list[tuple[str, float]] = []
    s.schedule(lambda: ran.append(("kw", clock.monotonic())), FixedRate(minutes=5))
    s.schedule(lambda: ran.append(("pos", clock.monotonic())), FixedRate(300))
    s.run_for(timedelta(minutes=10))
    assert ran == [("kw", 300.0), ("pos", 300.0), ("kw", 600.0), ("pos", 600.0)]
    assert FixedRate(minutes=5) == FixedRate(300) != FixedRate(minutes=5, start=FAKE_START)
    assert FixedDelay(minutes=5) != FixedRate(minutes=5)
    with pytest.raises(AttributeError, match="immutable"):
        FixedRate(5)._ns = 1


@pytest.mark.parametrize(
    "rate",
    [
        FixedRate(300),
        FixedRate(minutes=5, start=FAKE_START),
        FixedDelay(hours=1, initial_delay=3),
        After(minutes=5),
    ],
    ids=repr,
)
def test_intervals_pickle_and_copy(rate: FixedRate | FixedDelay | After) -> None:
    import copy
    import pickle

    for again in (pickle.loads(pickle.dumps(rate)), copy.copy(rate), copy.deepcopy(rate)):
        assert again == rate and repr(again) == repr(rate) and type(again) is type(rate)
        with pytest.raises(AttributeError, match="immutable"):
            again._ns = 1


class _TickingClock:
    """A real clock's readings: each one a little later than the last."""

    def __init__(self, wall: int) -> None:
        self.wall = wall
        self.mono = 10**9

    def time_ns(self) -> int:
        self.wall += 937
        return self.wall

    def monotonic_ns(self) -> int:
        self.mono += 937
        return self.mono


def test_a_fixed_rate_grid_seen_on_the_wall_axis_is_exact_utc_instants() -> None:
    # A durable store's scheduler reads time through WallAxis: an anchored grid's points must be
    # exactly start + k * interval (the fire keys of every process), not off by the time
    # between two readings of the clock.
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    start_ns = int(start.timestamp()) * 10**9
    ticking = _TickingClock(start_ns + 3600 * 10**9 + 123)
    env = Env(WallAxis(ticking), random.Random(0), timezone.utc)  # type: ignore[arg-type]
    first = FixedRate(60, start=start).first(env)
    assert first is not None and (first - start_ns) % (60 * 10**9) == 0
    assert start_ns + 3600 * 10**9 < first <= start_ns + 3660 * 10**9
    # (Outside that view the anchor is converted to elapsed time, once, as before.)
    plain = Env(ticking, random.Random(0), timezone.utc)  # type: ignore[arg-type]
    again = FixedRate(60, start=start).first(plain)
    assert again is not None and again < 10**9 + 60 * 10**9
