"""What durable stores write: arguments as JSON, functions by name, triggers and retry policies
as records, each with its way back; and every refusal before anything is stored."""

from __future__ import annotations

import functools
import json
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest

from duetime import (
    After,
    At,
    Cron,
    ExponentialBackoff,
    FakeClock,
    FixedBackoff,
    FixedDelay,
    FixedRate,
    InvalidArgument,
    NoRetry,
    Poisson,
    Recurrence,
    Window,
)
from duetime._durable import trigger_json
from duetime.cron import fire_times
from duetime.recurrence import Env
from duetime.stores.codec import (
    decode_retry,
    decode_trigger,
    dumps_args,
    encode_retry,
    encode_trigger,
    load_trigger,
    loads_args,
    resolve_task,
    task_reference,
)
from duetime.testing import FAKE_START

BERLIN = ZoneInfo("Europe/Berlin")


def send_email(to: str) -> None:
    """A module-level function: importable by name."""


class Mailer:
    def send(self) -> None: ...


def test_arguments_round_trip_with_datetimes_decimals_and_uuids() -> None:
    args = (
        "a@x",
        42,
        1.5,
        None,
        True,
        [1, [2, 3]],
        datetime(2026, 3, 29, 9, 0, tzinfo=BERLIN),
        datetime(2026, 3, 29, 9, 0),
        date(2026, 3, 29),
        Decimal("19.99"),
        UUID("12345678-1234-5678-1234-567812345678"),
    )
    kwargs = {"meta": {"$date": "not a tag: a user's dict"}, "amounts": (Decimal("1.10"),)}
    text = dumps_args(args, kwargs)
    assert json.loads(text)  # plain JSON: no pickle anywhere
    back_args, back_kwargs = loads_args(text)
    assert back_args == args
    assert back_args[6].utcoffset() == timedelta(hours=2)  # the offset survives
    assert back_kwargs == {
        "meta": {"$date": "not a tag: a user's dict"},
        "amounts": [Decimal("1.10")],
    }


def test_a_datetime_in_an_iana_zone_comes_back_in_that_zone() -> None:
    # It came back with the fixed offset it had: an hour added after a restart then missed the
    # DST change, and a time in the repeated hour (fold=1) compared unequal to what was stored.
    stored = [
        datetime(2026, 3, 28, 9, 0, tzinfo=BERLIN),
        datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN, fold=1),
        datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN),
    ]
    back, kwargs = loads_args(dumps_args(stored, {"k": {"$zoned": 1}}))
    assert kwargs == {"k": {"$zoned": 1}}
    assert [(d.tzinfo, d.fold, d.utcoffset()) for d in back] == [
        (BERLIN, 0, timedelta(hours=1)),
        (BERLIN, 1, timedelta(hours=1)),
        (BERLIN, 0, timedelta(hours=2)),
    ]
    assert [d.timestamp() for d in back] == [d.timestamp() for d in stored]
    # The next day at 09:00, in Berlin: after the change to summer time (+02:00).
    assert (back[0] + timedelta(days=1)).utcoffset() == timedelta(hours=2)
    # A zone this host does not know: the instant, with its stored offset.
    # At the calendar's ends the conversion through UTC overflows: the stored offset stands
    # (it raised OverflowError, and no process could load the store's jobs).
    edges = [
        datetime.max.replace(tzinfo=ZoneInfo("America/New_York")),
        datetime.min.replace(tzinfo=BERLIN),
    ]
    assert loads_args(dumps_args(edges, None))[0] == tuple(edges)
    # A user's dict of that one key, written before the tag existed, comes back as a dict.
    assert loads_args('{"args":[{"$zoned":1},{"$zoned":["a"]}],"kwargs":{}}')[0] == (
        {"$zoned": 1},
        {"$zoned": ["a"]},
    )
    text = dumps_args([stored[0]], None).replace("Europe/Berlin", "Nowhere/Atlantis")
    ((alone,), _) = loads_args(text)
    assert alone == stored[0] and alone.utcoffset() == timedelta(hours=1)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            (object(),),
            None,
            r"args\[0\] cannot be stored: <object object at .*> \(object\) is not JSON",
        ),
        (([1, {2}],), None, r"args\[0\]\[1\] cannot be stored: \{2\} \(set\) is not JSON"),
        ((), {"when": float("nan")}, r"kwargs\['when'\] cannot be stored: nan is not finite"),
        (({1: "a"},), None, r"args\[0\] cannot be stored: dict key 1 is not a str"),
        ((b"raw",), None, r"args\[0\] cannot be stored: b'raw' \(bytes\) is not JSON"),
        (([1, 10**5000],), None, r"args\[0\]\[1\] cannot be stored: Exceeds the limit"),
    ],
)
def test_arguments_json_cannot_carry_are_refused_naming_them(
    args: tuple[Any, ...], kwargs: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        dumps_args(args, kwargs)


def test_arguments_that_contain_themselves_or_nest_too_deeply_are_refused() -> None:
    # (They raised RecursionError from schedule().)
    looped: dict[str, Any] = {}
    looped["self"] = looped
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    for args in ((looped,), (1, deep)):
        with pytest.raises(
            InvalidArgument, match=r"args and kwargs cannot be stored: a value contains itself"
        ):
            dumps_args(args, None)
    with pytest.raises(InvalidArgument, match=r"or is nested too deeply for JSON"):
        dumps_args((), {"tree": deep})


def test_functions_are_stored_by_task_name_or_module_and_qualname() -> None:
    tasks = {"mail": send_email}
    assert task_reference(send_email, tasks) == "mail"
    assert task_reference(send_email, {}) == "tests.test_codec:send_email"
    assert task_reference(json.dumps, {}) == "json:dumps"
    for bad in (lambda: None, functools.partial(send_email, "x"), Mailer().send, Mailer()):
        with pytest.raises(
            InvalidArgument, match=r"cannot be stored: a durable job names its function"
        ):
            task_reference(bad, {})  # type: ignore[arg-type]

    def local() -> None: ...

    with pytest.raises(InvalidArgument, match=r"register it with @s\.task"):
        task_reference(local, {})


def test_a_stored_name_runs_only_what_this_process_allows() -> None:
    tasks = {"mail": send_email}
    assert resolve_task("mail", tasks) is send_email
    # Registered under a name, found by its module:qualname too.
    assert resolve_task("tests.test_codec:send_email", tasks) is send_email
    # Not registered: a row alone never imports code...
    assert resolve_task("os:system", tasks) is None
    assert resolve_task("json:dumps", {}) is None
    # ...unless the process allows imports under that module prefix.
    assert resolve_task("json:dumps", {}, import_prefixes=("json",)) is json.dumps
    assert resolve_task("os:system", {}, import_prefixes=("json",)) is None
    assert resolve_task("unknown", tasks) is None


TRIGGERS: list[Recurrence] = [
    At(datetime(2026, 3, 29, 9, 0, tzinfo=BERLIN)),
    After(30),
    After(timedelta(milliseconds=1500)),
    FixedRate(minutes=5),
    FixedRate(300, start=datetime(2026, 1, 5, 8, tzinfo=timezone.utc)),
    FixedRate(timedelta(hours=1)),
    FixedDelay(seconds=0.25, initial_delay=3),
    FixedDelay(hours=1),
    Cron("0 9 * * mon-fri", tz="Europe/Berlin"),
    Cron("*/15 * * * *", tz=BERLIN, start=datetime(2026, 1, 1, tzinfo=timezone.utc)),
    Cron("0 0 1 * *", tz=timezone(timedelta(hours=5, minutes=30))),
    Cron("30 2 * * *"),
    Poisson(per_day=300, window=Window("09:00", "18:00", days="mon-fri", tz="Europe/Berlin")),
    Poisson(rate=0.5),
    Poisson(
        mean_interval=60, window=[Window("22:00", "06:00"), Window(time(12), time(13), days=[5, 6])]
    ),
]


def occurrences(trigger: Recurrence, n: int = 5) -> list[int | None]:
    env = Env(FakeClock(start=FAKE_START), __import__("random").Random(7), BERLIN)
    out: list[int | None] = []
    due = trigger.first(env)
    for _ in range(n):
        out.append(due)
        if due is None:
            break
        due = trigger.next(due, env)
    return out


@pytest.mark.parametrize("trigger", TRIGGERS, ids=repr)
def test_every_trigger_round_trips(trigger: Recurrence) -> None:
    record = encode_trigger(trigger)
    assert json.loads(json.dumps(record)) == record  # JSON values only
    back = decode_trigger(record)
    assert type(back) is type(trigger)
    assert occurrences(back) == occurrences(trigger)
    # (A Cron's zone comes back by name, not as the same object; an After given a timedelta
    # comes back in seconds.)
    if not isinstance(trigger, (Cron, After)):
        assert back == trigger
    if isinstance(trigger, After):
        assert back._ns == trigger._ns  # type: ignore[attr-defined]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=repr)
def test_a_stored_trigger_is_written_back_as_the_same_text(trigger: Recurrence) -> None:
    # An outcome compares the row's recurrence text with the one its process writes (another
    # process may have rescheduled the job meanwhile): a job loaded from the store must encode
    # to exactly the text it was loaded from.
    text = trigger_json(trigger)
    assert trigger_json(load_trigger(text)) == text
    assert trigger_json(decode_trigger(json.loads(text))) == text


@pytest.mark.parametrize("trigger", TRIGGERS, ids=repr)
def test_a_stored_trigger_text_is_decoded_once(trigger: Recurrence) -> None:
    text = json.dumps(encode_trigger(trigger))
    first = load_trigger(text)
    assert occurrences(first) == occurrences(trigger)
    # The same text again (another job on the same schedule): the same frozen value, shared.
    assert load_trigger(text) is first
    assert load_trigger(json.dumps(encode_trigger(trigger))) is first


def test_a_stored_at_is_read_as_the_json_path_reads_it() -> None:
    from duetime._durable import trigger_json

    when = datetime(2026, 3, 29, 9, 0, 0, 123456, tzinfo=BERLIN)
    text = trigger_json(At(when))
    assert load_trigger(text) == decode_trigger(json.loads(text)) == At(when)
    assert load_trigger(text)._ns == At(when)._ns  # type: ignore[attr-defined]
    # Texts the short path does not take go the general way, with its errors.
    naive = '{"type":"at","when":"2026-03-29T09:00:00"}'
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        load_trigger(naive)
    with pytest.raises(ValueError):
        load_trigger('{"type":"at","when":"tomorrow"}')
    # (Python 3.11's fromisoformat takes any character between date and time: a text that
    # is not JSON must not get past the short path.)
    with pytest.raises(ValueError):
        load_trigger('{"type":"at","when":"2026-03-29"09:00:00+00:00"}')
    spaced = '{"type": "at", "when": "2026-03-29T09:00:00+02:00"}'
    assert load_trigger(spaced) == At(datetime(2026, 3, 29, 7, tzinfo=timezone.utc))


def test_the_trigger_cache_is_bounded_and_keeps_no_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    from duetime.stores import codec

    monkeypatch.setattr(codec, "_TRIGGERS", {})
    monkeypatch.setattr(codec, "_TRIGGERS_MAX", 3)
    texts = [json.dumps(encode_trigger(After(seconds=i + 1))) for i in range(5)]
    for text in texts:
        load_trigger(text)
        assert len(codec._TRIGGERS) <= 3
    assert texts[-1] in codec._TRIGGERS
    bad = json.dumps({"type": "sometimes"})
    for _ in range(2):
        with pytest.raises(InvalidArgument, match="not a stored trigger"):
            load_trigger(bad)
    assert bad not in codec._TRIGGERS


def test_a_cron_zone_comes_back_as_the_same_zone() -> None:
    back = decode_trigger(encode_trigger(Cron("0 9 * * *", tz=BERLIN)))
    after = datetime(2026, 3, 27, tzinfo=timezone.utc)
    assert fire_times(back, after, 3) == fire_times(Cron("0 9 * * *", tz=BERLIN), after, 3)  # type: ignore[arg-type]


def test_triggers_and_policies_it_cannot_store_are_refused() -> None:
    class Every:
        timebase = 1
        after_finish = False
        recurring = True

        def first(self, env: Env) -> int | None:
            return 0

        def next(self, due: int, env: Env) -> int | None:
            return due + 1

        def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
            return until + 1, 0

    with pytest.raises(InvalidArgument, match=r"when cannot be stored: .* is a Every"):
        encode_trigger(Every())

    class Policy:
        def delay(self, *args: object) -> float | None:
            return None

    with pytest.raises(InvalidArgument, match=r"retry cannot be stored: .* is a Policy"):
        encode_retry(Policy())


@pytest.mark.parametrize(
    "policy",
    [
        None,
        NoRetry(),
        FixedBackoff([5, 30, timedelta(minutes=5)]),
        FixedBackoff([1], retry_on=(ConnectionError, TimeoutError)),
        ExponentialBackoff(base=0.5, factor=3, cap=60, max_attempts=4, jitter=None),
        ExponentialBackoff(jitter="decorrelated", retry_on=ValueError),
    ],
    ids=repr,
)
def test_every_retry_policy_round_trips(policy: Any) -> None:
    record = encode_retry(policy)
    assert json.loads(json.dumps(record)) == record
    back = decode_retry(record)
    if policy is None:
        assert back is None
        return
    assert type(back) is type(policy)
    rng = __import__("random").Random(1)
    rng2 = __import__("random").Random(1)
    for attempt in (1, 2, 3, 5):
        assert back.delay(attempt, ConnectionError(), rng, 1.0) == policy.delay(  # type: ignore[union-attr]
            attempt, ConnectionError(), rng2, 1.0
        )
    assert back.delay(1, KeyError(), rng, None) == policy.delay(1, KeyError(), rng2, None)  # type: ignore[union-attr]


def test_a_retry_on_class_that_cannot_be_named_is_refused() -> None:
    class Local(Exception):
        pass

    with pytest.raises(InvalidArgument, match=r"retry_on names .* which cannot be imported"):
        encode_retry(FixedBackoff([1], retry_on=Local))


def test_a_stored_retry_policy_never_imports_what_it_names() -> None:
    import sys

    assert "this" not in sys.modules  # (importing it prints the Zen of Python)
    record = {"type": "fixed", "delays": [1], "retry_on": ["this:Exception"]}
    with pytest.raises(InvalidArgument, match="a stored record never imports code"):
        decode_retry(record)
    assert "this" not in sys.modules
