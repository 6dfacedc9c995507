"""Cron: the DST policy of docs/time.md in several zones, crontab semantics, validation."""

from __future__ import annotations

import copy
import pickle
import random
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime import Cron, FakeClock, InvalidArgument, Scheduler
from duetime.cron import fire_times

from .conftest import fresh_python


def fires(expr: str, zone: str, start: str, n: int) -> list[str]:
    tz = ZoneInfo(zone)
    after = datetime.fromisoformat(start).replace(tzinfo=tz)
    return [f.isoformat() for f in fire_times(Cron(expr, tz=zone), after, n)]


# (zone, expression, start (local), expected fire times with their offsets)
DST_TABLE = [
    # Europe/Berlin: 2026-03-29 02:00 -> 03:00 (gap); 2026-10-25 03:00 -> 02:00 (fold)
    ("Europe/Berlin", "30 2 * * *", "2026-03-28T12:00",
     ["2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00"]),       # gap: fold=0 reading
    ("Europe/Berlin", "30 2 * * *", "2026-10-24T12:00",
     ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),       # fold: first pass only
    ("Europe/Berlin", "*/30 2 * * *", "2026-10-25T00:00",
     ["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00",
      "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00",
      "2026-10-26T02:00:00+01:00"]),                                    # wildcard: both passes
    ("Europe/Berlin", "*/30 2 * * *", "2026-03-28T12:00",
     ["2026-03-30T02:00:00+02:00", "2026-03-30T02:30:00+02:00"]),       # wildcard: gap is empty
    ("Europe/Berlin", "0 * * * *", "2026-10-25T00:30",
     ["2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00",
      "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"]),
    ("Europe/Berlin", "0,30 2,3 * * *", "2026-03-28T12:00",
     ["2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00",
      "2026-03-30T02:00:00+02:00"]),                                    # 02:xx and 03:xx coincide
    # America/New_York: 2026-03-08 02:00 -> 03:00; 2026-11-01 02:00 -> 01:00
    ("America/New_York", "0 2 * * *", "2026-03-07T12:00",
     ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"]),
    ("America/New_York", "30 1 * * *", "2026-10-31T12:00",
     ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
    ("America/New_York", "*/20 1 * * *", "2026-11-01T00:50",
     ["2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
      "2026-11-01T01:00:00-05:00", "2026-11-01T01:20:00-05:00", "2026-11-01T01:40:00-05:00",
      "2026-11-02T01:00:00-05:00"]),
    # Australia/Lord_Howe: 30-minute shifts. 2026-04-05 02:00 -> 01:30; 2026-10-04 02:00 -> 02:30
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00",
     ["2026-10-04T02:45:00+11:00", "2026-10-05T02:15:00+11:00"]),
    ("Australia/Lord_Howe", "*/15 1 * * *", "2026-04-05T00:50",
     ["2026-04-05T01:00:00+11:00", "2026-04-05T01:15:00+11:00", "2026-04-05T01:30:00+11:00",
      "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30",
      "2026-04-06T01:00:00+10:30"]),
    ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00",
     ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]),
    # Pacific/Apia skipped 2011-12-30 entirely (-10:00 -> +14:00)
    ("Pacific/Apia", "0 9 * * *", "2011-12-29T00:00",
     ["2011-12-29T09:00:00-10:00", "2011-12-31T09:00:00+14:00",
      "2012-01-01T09:00:00+14:00"]),                                    # Dec 30 09:00 = Dec 31's
    ("Pacific/Apia", "0 */8 * * *", "2011-12-29T12:00",
     ["2011-12-29T16:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T08:00:00+14:00"]),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "expr", "start", "expected"), DST_TABLE)
def test_dst_policy(zone: str, expr: str, start: str, expected: list[str]) -> None:
    assert fires(expr, zone, start, len(expected)) == expected


CALENDAR_TABLE = [
    ("0 0 L * *", "2026-01-15T00:00", ["2026-01-31", "2026-02-28", "2026-03-31"]),
    ("0 0 L 2 *", "2027-03-01T00:00", ["2028-02-29", "2029-02-28"]),  # leap year end of month
    ("0 9 * * L5", "2026-01-01T00:00", ["2026-01-30", "2026-02-27", "2026-03-27"]),  # last Fri
    ("0 9 * * mon#2", "2026-01-01T00:00", ["2026-01-12", "2026-02-09", "2026-03-09"]),
    ("0 0 13 * fri", "2026-04-01T00:00", ["2026-04-03", "2026-04-10", "2026-04-13", "2026-04-17"]),
    ("0 0 * * 7", "2026-01-01T00:00", ["2026-01-04", "2026-01-11"]),  # 7 is Sunday
    ("0 0 * * 0", "2026-01-01T00:00", ["2026-01-04", "2026-01-11"]),
    ("0 12 1-7/3 jan,feb *", "2026-01-01T00:00", ["2026-01-01", "2026-01-04", "2026-01-07"]),
    ("@monthly", "2026-01-15T00:00", ["2026-02-01", "2026-03-01"]),
    # A numeric weekday range before '#' means what the named one does (croniter refused it).
    ("0 0 * * 1-5#1", "2026-01-01T00:00", ["2026-01-02", "2026-01-05", "2026-01-06"]),
    ("0 0 * * mon-fri#1", "2026-01-01T00:00", ["2026-01-02", "2026-01-05", "2026-01-06"]),
    ("0 0 * * 5-7#1", "2026-01-01T00:00", ["2026-01-02", "2026-01-03", "2026-01-04"]),
    ("0 0 * * 5-1#1", "2026-01-01T00:00", ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"]),
    ("@yearly", "2026-01-15T00:00", ["2027-01-01", "2028-01-01"]),
]


@pytest.mark.parametrize(("expr", "start", "expected_days"), CALENDAR_TABLE)
def test_calendar_semantics(expr: str, start: str, expected_days: list[str]) -> None:
    got = fires(expr, "UTC", start, len(expected_days))
    assert [g[:10] for g in got] == expected_days


def test_seconds_field_first() -> None:
    got = fires("*/20 * * * * *", "UTC", "2026-01-01T00:00", 4)
    assert got == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
        "2026-01-01T00:01:00+00:00",
        "2026-01-01T00:01:20+00:00",
    ]


def test_start_and_inclusive_end() -> None:
    utc = timezone.utc
    c = Cron(
        "0 * * * *",
        tz="UTC",
        start=datetime(2026, 1, 1, 10, tzinfo=utc),
        end=datetime(2026, 1, 1, 12, tzinfo=utc),
    )
    got = fire_times(c, datetime(2026, 1, 1, tzinfo=utc), 10)
    assert [g.hour for g in got] == [10, 11, 12]


def test_wildcard_classification() -> None:
    assert Cron("* 2 * * *").wildcard_timed
    assert Cron("0 * * * *").wildcard_timed
    assert Cron("*/5 3 * * *").wildcard_timed
    assert not Cron("30 2 * * *").wildcard_timed
    assert not Cron("0 0,12 * * *").wildcard_timed
    assert Cron("@hourly").wildcard_timed
    assert not Cron("@daily").wildcard_timed
    assert Cron("0 * 2 * * *").wildcard_timed  # six fields: seconds, minute, hour
    # `?` is `*` (docs/time.md), here too: both passes of a repeated hour.
    assert Cron("? 2 * * *").wildcard_timed and Cron("0 ? * * *").wildcard_timed
    assert fires("? 2 * * *", "Europe/Berlin", "2026-10-25T02:58", 3) == fires(
        "* 2 * * *", "Europe/Berlin", "2026-10-25T02:58", 3
    )
    assert fires("0 ? * * *", "Europe/Berlin", "2026-10-25T01:30", 3) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("61 * * * *", "not a valid cron expression: '61 \\* \\* \\* \\*'"),
        ("* * *", "5 fields"),
        ("* * * * * * *", "5 fields"),
        ("", "5 fields"),
        ("foo bar baz qux quux", "not a valid cron expression"),
        ("0 0 30 2 *", "can never match"),
        ("H * * * *", "not deterministic"),
        ("R * * * *", "not deterministic"),
        ("@reboot", r"@reboot names no time: run the job when your program starts"),
        ("@fortnightly", "known aliases are @yearly, @annually"),
        # (croniter's words were "it bands 'l-2' in field 2 are not acceptable", "it is not
        # acceptable".)
        (
            "0 0 L-2 * *",
            r"the day-of-month field has 'L-2', no form of L, W or # duetime reads: the day of",
        ),
        ("0 0 * * MON#2#3", r"the day-of-week field has 'MON#2#3', no form of L, W or #"),
        ("0 0 15W/2 * *", r"the day-of-month field has '15W/2', no form of L, W or #"),
        ("0 0 1 * 1#2,8#1", r"the day-of-week field has '8#1', no form of L, W or #"),
        ("0 0 * L *", r"the month field has 'L', which belongs in a day field"),
        ("0 L * * *", r"the hour field has 'L', which belongs in a day field"),
        ("0 0 l L *", r"the month field has 'L'"),  # (as written there, not the day's 'l')
        # 'n/s' runs up to Saturday: nothing follows 7 (croniter read '7/1' as every day).
        (
            "0 0 * * 7/1",
            r"the day-of-week field steps from n up to Saturday \(6\), so nothing follows 7, "
            r"got '7/1'; write 0/1 to start from Sunday, or 7 for Sundays",
        ),
        ("0 0 * * 07/3", r"nothing follows 7, got '07/3'"),
        ("0 0 * * 007/1", r"nothing follows 7, got '007/1'"),
        # A typo with an l or a w in it is a typo, not L or W out of place.
        (
            "0 0 * jully *",
            r"the month field must be numbers 1-12 or names such as jan, feb, mar, got 'jully'",
        ),
        (
            "0 0 * * * @daily",
            r"the day-of-week field must be a number, a range or '\*', got '@daily'",
        ),
    ],
)
def test_invalid_expressions_are_rejected_quoting_the_input(expr: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Cron(expr)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("0 25 * * *", "the hour field must be within 0-23, got '25'"),
        (
            "*/0 * * * *",
            "the minute field must be stepped by a whole number of 1 or more, got '*/0'",
        ),
        ("0 0 1 * * extra", "the day-of-week field must be numbers 0-7 or names such as sun"),
        ("0 0 1 * fri#6", "the day-of-week field must give a weekday's occurrence 1-5 after '#'"),
        ("0 0 0 * *", "the day-of-month field must be within 1-31, got '0'"),
        ("0 0 * 1-13 *", "the month field must be within 1-12, got '13' in '1-13'"),
        ("61 * * * * *", "the second field must be within 0-59, got '61'"),
    ],
)
def test_an_invalid_field_is_named_with_its_range(expr: str, reason: str) -> None:
    # (croniter's own reasons numbered the fields from 0 and quoted its rewritten expression:
    # "it step '0' in field 0 is not acceptable", "Invalid day_of_week value: '6'" for fri#6.)
    with pytest.raises(InvalidArgument) as caught:
        Cron(expr)
    assert str(caught.value).startswith(f"expr is not a valid cron expression: {expr!r} ({reason}")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"hour": 25}, r"^hour must be within 0-23, got '25' \(Cron\(hour=\.\.\.\) is not a valid"),
        ({"minute": -1}, r"^minute must be a number, a range or '\*', got '-1'"),
        ({"day": "1,15,last"}, r"^day takes L for the last day of the month, got 'last'"),
    ],
)
def test_an_invalid_keyword_field_is_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Cron(**fields)


def test_a_cron_string_given_as_when_is_named_when() -> None:
    s = Scheduler(FakeClock())
    with pytest.raises(InvalidArgument, match=r"^when must have 5 fields .*got 1 in 'hello'"):
        s.schedule(print, "hello")
    with pytest.raises(InvalidArgument, match=r"^when is not a valid cron expression: '0 25"):
        s.schedule(print, "0 25 * * *")
    assert len(s) == 0


def test_other_bad_input() -> None:
    with pytest.raises(TypeError, match="expr must be a cron expression string"):
        Cron(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="not a known time zone: 'Mars/Olympus'"):
        Cron("* * * * *", tz="Mars/Olympus")
    utc = timezone.utc
    with pytest.raises(InvalidArgument, match="end must not be before start"):
        Cron(
            "* * * * *",
            start=datetime(2026, 2, 1, tzinfo=utc),
            end=datetime(2026, 1, 1, tzinfo=utc),
        )
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        Cron("* * * * *", start=datetime(2026, 2, 1))


def test_far_and_impossible_matches_are_bounded() -> None:
    # OR semantics, as crontab(5): day 29 of February *or* any Monday of February.
    assert fires("0 0 29 2 mon", "UTC", "2026-01-01T00:00", 1) == ["2026-02-02T00:00:00+00:00"]
    # A match years away is found by a bounded search; past year 9999 there is none.
    assert fires("0 0 29 2 *", "UTC", "2097-01-01T00:00", 1) == ["2104-02-29T00:00:00+00:00"]
    assert fires("0 0 1 1 *", "UTC", "9999-06-01T00:00", 1) == []  # past year 9999: none


def test_string_when_is_a_cron_in_the_scheduler_zone() -> None:
    clock = FakeClock(start=datetime(2026, 3, 28, 12, tzinfo=ZoneInfo("Europe/Berlin")))
    s = Scheduler(clock=clock, tz="Europe/Berlin")
    seen: list[str] = []
    s.schedule(lambda: seen.append(clock.now().astimezone(s.tz).isoformat()), "30 2 * * *")
    s.run_for(timedelta(days=2))
    assert seen == ["2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00"]


def reference(expr: str, tz: ZoneInfo, a: int, b: int, wildcard: bool) -> list[int]:
    """The policy stated directly, independent of duetime's segment search.

    croniter (trusted for naive wall-clock matching) lists the matching local minutes; PEP 495
    maps each to instants: a local time exists at an instant i if converting i back gives it.
    Wildcard-timed: every instant whose local time matches. Fixed-timed: the fold=0 reading.
    """
    out: set[int] = set()
    lo = datetime.fromtimestamp(a, timezone.utc).replace(tzinfo=None) - timedelta(days=2)
    hi = datetime.fromtimestamp(b, timezone.utc).replace(tzinfo=None) + timedelta(days=2)
    it = croniter(expr, lo)
    while (x := it.get_next(datetime)) <= hi:
        readings = {int(x.replace(tzinfo=tz, fold=f).timestamp()) for f in (0, 1)}
        if wildcard:
            candidates = {
                i for i in readings if datetime.fromtimestamp(i, tz).replace(tzinfo=None) == x
            }
        else:
            candidates = {int(x.replace(tzinfo=tz, fold=0).timestamp())}
        out.update(i for i in candidates if a < i <= b)
    return sorted(out)


ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia",
         "America/Sao_Paulo", "Asia/Tehran", "Europe/Dublin"]  # fmt: skip
EXPRS = ["*/15 * * * *", "30 2 * * *", "0,30 1-3 * * *", "* 2 * * *", "0 * * * *", "45 1 * * *",
         "0 0 * * *", "*/7 1-3 * * *", "59 23 * * *", "30 0 * * *"]  # fmt: skip


@given(
    zone=st.sampled_from(ZONES),
    expr=st.sampled_from(EXPRS),
    year=st.sampled_from([2011, 2024, 2026]),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=150, deadline=None)
def test_matches_brute_force_around_transitions(zone: str, expr: str, year: int, seed: int) -> None:
    tz = ZoneInfo(zone)
    rng = random.Random(seed)
    # Find a transition of this zone in that year by probing, then scan three days around it.
    t = int(datetime(year, 1, 1, tzinfo=timezone.utc).timestamp())
    offsets = [
        (t + d * 86400, tz.utcoffset(datetime.fromtimestamp(t + d * 86400, tz))) for d in range(366)
    ]
    changes = [offsets[i][0] for i in range(1, 366) if offsets[i][1] != offsets[i - 1][1]]
    center = rng.choice(changes) if changes else t + rng.randrange(366) * 86400
    a = center - 2 * 86400 + rng.randrange(3600)
    b = a + 3 * 86400
    cron = Cron(expr)
    ours = []
    cur = a
    while (nxt := cron.next_fire(cur, tz)) is not None and nxt <= b:
        ours.append(nxt)
        cur = nxt
    assert ours == reference(expr, tz, a, b, cron.wildcard_timed)


@pytest.mark.parametrize(
    ("fields", "expr"),
    [
        ({"hour": 9}, "0 9 * * *"),
        ({"hour": 9, "minute": 30}, "30 9 * * *"),
        ({"minute": "*/5"}, "*/5 * * * *"),
        ({"day_of_week": "mon-fri", "hour": 10}, "0 10 * * mon-fri"),
        ({"day": 1}, "0 0 1 * *"),
        ({"month": 6}, "0 0 1 6 *"),
        ({"second": 30}, "30 * * * * *"),
        ({"month": "jan", "day": 15, "hour": 12}, "0 12 15 jan *"),
    ],
)
def test_apscheduler_style_fields_build_the_expression(fields: dict[str, Any], expr: str) -> None:
    # APScheduler's CronTrigger rule: '*' above the least significant field given, the
    # minimum below it.
    cron = Cron(**fields)
    assert cron.expr == expr and cron == Cron(expr)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"day": 1, "day_of_week": "mon"}, InvalidArgument, "APScheduler runs on days matching both, cron on days matching either"),
        ({"day_of_week": 0}, InvalidArgument, r"APScheduler \(0 = Monday\) and cron \(0 = Sunday\)"),
        ({"hour": 1.5}, TypeError, "hour must be an int or a cron field string, got 1.5"),
        ({"expr": "0 9 * * *", "hour": 9}, TypeError, "an expression or field keywords, not both"),
        ({"hour": 25}, InvalidArgument, "not a valid cron expression: '0 25 \\* \\* \\*'"),
    ],
)  # fmt: skip
def test_apscheduler_style_fields_refuse_what_would_mislead(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Cron(**fields)


def test_croniter_is_imported_at_the_first_cron_not_with_duetime() -> None:
    code = (
        "import sys, duetime\n"
        "print('croniter' in sys.modules)\n"
        "duetime.Cron('0 9 * * *', tz='Europe/Berlin')\n"
        "print('croniter' in sys.modules)\n"
    )
    assert fresh_python(code) == ["False", "True"]


def test_a_cron_copies_and_pickles() -> None:
    # (Its per-thread croniter cache made copy.deepcopy and pickle raise TypeError.)
    cron = Cron("0 9 * * mon-fri#1", tz="Europe/Berlin")
    after = datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    for other in (copy.deepcopy(cron), pickle.loads(pickle.dumps(cron)), copy.copy(cron)):
        assert other == cron
        assert fire_times(other, after, 3) == fire_times(cron, after, 3)


def test_a_zone_given_by_name_or_as_a_zoneinfo_is_one_zone() -> None:
    # (A store keeps the name: the trigger read back must equal the one scheduled.)
    by_name = Cron("0 9 * * *", tz="Europe/Berlin")
    as_zone = Cron("0 9 * * *", tz=ZoneInfo("Europe/Berlin"))
    assert by_name == as_zone and hash(by_name) == hash(as_zone)
    assert by_name != Cron("0 9 * * *", tz="Europe/Paris")
    assert Cron("0 9 * * *", tz=timezone.utc) != by_name
