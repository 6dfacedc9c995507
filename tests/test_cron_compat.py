"""duetime's cron against crontab(5) and an independent implementation, cronsim.

The differential test generates expressions (every field; lists, ranges, steps, names, ``L``,
``LW``, ``nL``, ``#``) and compares the fire times with cronsim's. In UTC and fixed-offset zones
they must be equal; in DST zones cronsim's naive (wall-clock) matches are mapped to instants by
the DST policy of docs/time.md and must then be equal. Each place where duetime deliberately
differs from cronsim is a policy written in docs/time.md and pinned by a named test below.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime import Cron, InvalidArgument
from duetime.cron import fire_times

UTC = timezone.utc
START = datetime(2026, 11, 20, 7, 13, tzinfo=UTC)

# -- regressions: each case of the crontab(5) issue ---------------------------------------------


def days(expr: str, start: str, n: int, zone: str = "UTC") -> list[str]:
    after = datetime.fromisoformat(start).replace(tzinfo=ZoneInfo(zone))
    return [f"{f:%Y-%m-%d %a}" for f in fire_times(Cron(expr, tz=zone), after, n)]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # Both day fields restricted: OR. Day 31 never comes in February, Sundays do.
        ("0 0 31 2 0", ["2027-02-07 Sun", "2027-02-14 Sun", "2027-02-21 Sun", "2027-02-28 Sun"]),
        ("0 0 30 2 0", ["2027-02-07 Sun", "2027-02-14 Sun", "2027-02-21 Sun", "2027-02-28 Sun"]),
        ("0 0 31 4 0", ["2027-04-04 Sun", "2027-04-11 Sun", "2027-04-18 Sun", "2027-04-25 Sun"]),
    ],
)
def test_an_impossible_day_of_month_or_a_weekday_is_valid(expr: str, expected: list[str]) -> None:
    assert days(expr, "2027-01-01T00:00", 4) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # '#', 'L' and 'W' obey the same OR rule as plain values: the 1st, and the 2nd Friday.
        ("0 0 1 * fri#2", ["2027-01-08 Fri", "2027-02-01 Mon", "2027-02-12 Fri", "2027-03-01 Mon"]),
        ("0 0 1 * L5", ["2027-01-29 Fri", "2027-02-01 Mon", "2027-02-26 Fri", "2027-03-01 Mon"]),
        ("0 0 1 * fri#5", ["2027-01-29 Fri", "2027-02-01 Mon", "2027-03-01 Mon", "2027-04-01 Thu"]),
        ("0 0 15W * mon", ["2027-01-04 Mon", "2027-01-11 Mon", "2027-01-15 Fri", "2027-01-18 Mon"]),
    ],
)
def test_hash_l_and_w_beside_a_restricted_day_of_month_are_or_ed(
    expr: str, expected: list[str]
) -> None:
    assert days(expr, "2027-01-01T00:00", 4) == expected


def test_first_weekdays_of_january_or_the_first_seven_days() -> None:
    # Days 1-7 of January, or the first Monday..Friday of January: all of 1-7 (2027-01-01 is a
    # Friday, so the first Mon-Thu fall on the 4th-7th).
    got = days("30 23 1-7 JAN MON-FRI#1", "2026-12-31T00:00", 8)
    assert [d[:10] for d in got] == [f"2027-01-0{d}" for d in range(1, 8)] + ["2028-01-01"]


def test_a_day_field_starting_with_star_is_unrestricted_so_the_fields_are_and_ed() -> None:
    # crontab(5), cronie, cronsim: '*/7' starts with '*', so this is "days 1-7 that are
    # Sundays": the first Sunday of each month, a common idiom.
    assert days("1 1 1-7 * */7", "2027-01-01T00:00", 3) == [
        "2027-01-03 Sun",
        "2027-02-07 Sun",
        "2027-03-07 Sun",
    ]
    # Without the star, both are restricted: days 1-7, or any Sunday.
    assert days("1 1 1-7 * 0", "2027-01-08T00:00", 3) == [
        "2027-01-10 Sun",
        "2027-01-17 Sun",
        "2027-01-24 Sun",
    ]
    # A list holding '*' does not start with it: restricted, and OR-ed into every day.
    assert days("0 0 1,* * 1", "2027-01-01T00:00", 2) == ["2027-01-02 Sat", "2027-01-03 Sun"]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 30 2 *", "can never match"),
        ("0 0 31 4,6,9,11 *", "can never match"),
        ("0 0 31 2,4 */2", "can never match"),  # AND: day 31 of February or April never comes
    ],
)
def test_expressions_that_never_fire_are_refused_saying_why(expr: str, message: str) -> None:
    with pytest.raises(
        InvalidArgument, match=f"{message}: no date in 28 years .* {re.escape(repr(expr))}"
    ):
        Cron(expr)


def test_nothing_accepted_is_silent_forever() -> None:
    # Every accepted expression fires within 28 years: the ones that used to be accepted and
    # never fire (croniter gives up on an AND of '#'/'L' with the day of month).
    for expr in [
        "0 0 1 * fri#2",
        "0 0 1 * L5",
        "0 0 1 * fri#5",
        "0 0 13 * fri#5",
        "0 0 31 2 mon#5",
    ]:
        assert fire_times(Cron(expr, tz="UTC"), START, 1), expr


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # Quartz's and cronsim's spellings, with crontab's weekday numbers (0 and 7: Sunday).
        ("0 0 * * 5L", ["2027-01-29 Fri", "2027-02-26 Fri", "2027-03-26 Fri"]),
        ("0 0 * * 0L", ["2027-01-31 Sun", "2027-02-28 Sun", "2027-03-28 Sun"]),
        ("0 0 * * 7L", ["2027-01-31 Sun", "2027-02-28 Sun", "2027-03-28 Sun"]),
        ("0 0 * * friL", ["2027-01-29 Fri", "2027-02-26 Fri", "2027-03-26 Fri"]),
        ("0 0 * * L5", ["2027-01-29 Fri", "2027-02-26 Fri", "2027-03-26 Fri"]),  # croniter's
        # The last weekday (Mon-Fri) of the month.
        ("0 0 LW * *", ["2027-01-29 Fri", "2027-02-26 Fri", "2027-03-31 Wed"]),
    ],
)
def test_quartz_and_cronsim_spellings(expr: str, expected: list[str]) -> None:
    assert days(expr, "2027-01-01T00:00", 3) == expected


def test_lw_is_the_last_weekday_of_every_month_for_28_years() -> None:
    got = fire_times(Cron("0 0 LW * *", tz="UTC"), datetime(2001, 1, 1, tzinfo=UTC), 28 * 12)
    expected = []
    for year in range(2001, 2029):
        for month in range(1, 13):
            first_of_next = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
            last = first_of_next - timedelta(days=1)
            while last.weekday() >= 5:
                last -= timedelta(days=1)
            expected.append(last)
    assert got == expected


def test_an_equal_range_is_one_value_not_the_whole_field() -> None:
    # croniter reads 'a-a' as the whole field; crontab, cronsim and duetime as the value a.
    assert fire_times(Cron("5-5 * * * *", tz="UTC"), START, 2) == [
        datetime(2026, 11, 20, 8, 5, tzinfo=UTC),
        datetime(2026, 11, 20, 9, 5, tzinfo=UTC),
    ]
    assert days("0 0 * * wed-wed", "2027-01-01T00:00", 2) == ["2027-01-06 Wed", "2027-01-13 Wed"]
    assert days("0 0 1 may-5 *", "2027-01-01T00:00", 2) == ["2027-05-01 Sat", "2028-05-01 Mon"]


def test_a_list_mixing_hash_and_plain_weekdays_keeps_every_item() -> None:
    # croniter silently keeps only the '#' item of '6#3,sat'; every Saturday is meant.
    assert days("0 0 * * 6#3,sat", "2027-01-01T00:00", 3) == [
        "2027-01-02 Sat",
        "2027-01-09 Sat",
        "2027-01-16 Sat",
    ]
    assert days("0 0 * * L6,*", "2027-01-01T00:00", 2) == ["2027-01-02 Sat", "2027-01-03 Sun"]


# -- where duetime differs from cronsim on purpose (docs/time.md) ---------------------------------


def test_policy_a_time_in_a_spring_forward_gap_fires_at_the_fold_0_reading() -> None:
    # Debian cron (and cronsim, today) fire 02:30 at 03:00, the first minute that exists;
    # duetime fires at PEP 495's fold=0 reading, 03:30 new time (docs/time.md, "The DST
    # policy"). Only duetime's side is pinned: a peer may change its choice.
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime(2027, 3, 27, 12, tzinfo=berlin)
    ours = fire_times(Cron("30 2 * * *", tz=berlin), start, 1)[0]
    assert ours.astimezone(berlin).strftime("%H:%M%z") == "03:30+0200"


def test_policy_a_weekday_start_and_step_runs_to_saturday() -> None:
    # 'n/s' in the weekday field runs to 6 (Saturday) as in croniter: '1/2' is Mon, Wed, Fri,
    # never Sunday (some readers run it to 7); crontab(5) has no 'n/s' at all.
    assert [d[-3:] for d in days("0 0 * * 1/2", "2027-01-03T00:00", 4)] == [
        "Mon",
        "Wed",
        "Fri",
        "Mon",
    ]


def test_policy_an_equal_range_with_a_step_is_one_value() -> None:
    # crontab(5): '1-1/2' is the range 1..1 stepped, {1}, not '1/2' (1, 3, 5, ..): January
    # only, year after year. (cronsim before 2.9 read it as '1/2'; only duetime is pinned.)
    assert [d[:7] for d in days("0 0 1 1-1/2 *", "2026-12-31T00:00", 3)] == [
        "2027-01",
        "2028-01",
        "2029-01",
    ]


@pytest.mark.parametrize(
    "expr", ["0 0 15W * *", "0 0 * * sat-sun", "0 0 * * MON-FRI#1", "0 0 ? * *"]
)
def test_policy_duetime_accepts_extensions_beyond_crontab(expr: str) -> None:
    # nW (nearest weekday), wrap-around ranges, '#' on a range and '?' come from croniter and
    # Quartz (cronsim refused them when this was written). They are accepted, with croniter's
    # meaning.
    assert fire_times(Cron(expr, tz="UTC"), START, 1)


# -- the differential test ---------------------------------------------------------------------

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@st.composite
def plain(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None) -> str:
    """One field of plain items: values, ranges, steps, names, lists of one or two."""

    def value(v: int) -> str:
        if names and draw(st.booleans()):
            name = names[v - lo] if v - lo < len(names) else names[0]
            return name.upper() if draw(st.booleans()) else name
        return str(v)

    def item() -> str:
        kind = draw(st.sampled_from(["value", "range", "step", "rangestep"]))
        a = draw(st.integers(lo, hi))
        if kind == "value":
            return value(a)
        b = draw(st.integers(a, hi))
        step = draw(st.integers(2, max(2, (hi - lo) // 2)))
        if kind == "range":
            return f"{value(a)}-{value(b)}"
        if kind == "step" or a == hi:
            return f"*/{step}"
        # (Not 'a-a/s': cronsim reads it as 'a/s'; see the policy test.)
        return f"{a}-{max(b, a + 1)}/{step}"

    return ",".join(item() for _ in range(draw(st.integers(1, 2))))


@st.composite
def expressions(draw: st.DrawFn, sparse_minutes: bool = False) -> str:
    if sparse_minutes:
        minute = draw(st.sampled_from(["0", "30", "0,30", "*/15", "15-20", "45"]))
    else:
        minute = draw(st.one_of(st.just("*"), plain(0, 59)))
    hour = draw(st.one_of(st.just("*"), plain(0, 23)))
    dom = draw(
        st.one_of(
            st.just("*"),
            plain(1, 31),
            st.sampled_from(["L", "LW", "1,L", "*/10"]),
        )
    )
    month = draw(st.one_of(st.just("*"), plain(1, 12, MONTHS)))
    weekday = st.integers(0, 7)
    dow = draw(
        st.one_of(
            st.just("*"),
            plain(0, 6, WEEKDAYS),
            weekday.map(lambda d: f"{d}L"),
            st.tuples(weekday, st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
            st.tuples(st.integers(0, 6), st.integers(1, 4), st.integers(0, 6)).map(
                lambda t: f"{t[0]}#{t[1]},{t[2]}"
            ),
            st.sampled_from(["*/2", "*/3"]),
        )
    )
    return f"{minute} {hour} {dom} {month} {dow}"


def theirs(expr: str, start: datetime, n: int) -> list[datetime] | None:
    """cronsim's first ``n`` fires after ``start`` (None: cronsim refuses the expression)."""
    try:
        return list(islice(CronSim(expr, start), n))
    except CronSimError:
        return None


@settings(max_examples=200, deadline=None)
@given(
    expr=expressions(),
    zone=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=7))]
    ),
)
def test_same_fires_as_cronsim_in_utc_and_fixed_offset_zones(expr: str, zone: tzinfo) -> None:
    start = START.astimezone(zone)
    reference = theirs(expr, start, 25)
    try:
        cron = Cron(expr, tz=zone)
    except InvalidArgument:
        # Refused only if it never fires: cronsim refuses it too, or finds nothing for decades.
        assert reference is None or reference == [] or reference[0] > start.replace(year=2055)
        return
    if reference is None:
        return  # cronsim refuses an extension duetime accepts (see the policy tests)
    assert fire_times(cron, start, 25) == reference


def policy(expr: str, naive: list[datetime], zone: ZoneInfo, wildcard: bool) -> list[datetime]:
    """Naive local matches mapped to instants by docs/time.md's DST policy (PEP 495):
    wildcard-timed, every instant whose local time matches; fixed-timed, the fold=0 reading."""
    out: set[datetime] = set()
    for local in naive:
        if wildcard:
            for fold in (0, 1):
                instant = local.replace(tzinfo=zone, fold=fold).astimezone(UTC)
                if instant.astimezone(zone).replace(tzinfo=None) == local:
                    out.add(instant)
        else:
            out.add(local.replace(tzinfo=zone, fold=0).astimezone(UTC))
    return sorted(out)


TRANSITIONS = [
    ("Europe/Berlin", datetime(2027, 3, 28, 1, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2027, 10, 31, 1, tzinfo=UTC)),
    ("America/New_York", datetime(2027, 3, 14, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2027, 11, 7, 6, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2027, 4, 3, 15, tzinfo=UTC)),  # 30-minute shift
]


@settings(max_examples=60, deadline=None)
@given(expr=expressions(sparse_minutes=True), where=st.sampled_from(TRANSITIONS))
def test_same_fires_as_cronsim_in_dst_zones_after_the_written_policy(
    expr: str, where: tuple[str, datetime]
) -> None:
    zone = ZoneInfo(where[0])
    start, end = where[1] - timedelta(hours=12), where[1] + timedelta(hours=12)
    try:
        cron = Cron(expr, tz=zone)
    except InvalidArgument:
        return  # covered by the UTC test
    local_start = start.astimezone(zone).replace(tzinfo=None) - timedelta(hours=3)
    try:
        naive = []
        for t in CronSim(expr, local_start):
            if t > end.astimezone(zone).replace(tzinfo=None) + timedelta(hours=3):
                break
            naive.append(t)
    except CronSimError:
        return
    expected = [t for t in policy(expr, naive, zone, cron.wildcard_timed) if start < t <= end]
    ours = []
    for fire in fire_times(cron, start, 400):
        if fire > end:
            break
        ours.append(fire.astimezone(UTC))
    assert ours == expected
