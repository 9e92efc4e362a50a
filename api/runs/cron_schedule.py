"""Cron expressions (``croniter``): checking one a client sends, and its next due time.

LangGraph's schedules are 5-field, minute-resolution expressions (``*/5 * * * *``; the
``@hourly`` style macros too). A 6-field expression is taken as seconds first
(``*/10 * * * * *``), for deployments that lower ``THREADLINE_CRON_MIN_INTERVAL_SECONDS``
below a minute; by default no schedule may fire more often than once a minute.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from croniter import croniter

from api.platform.errors import Invalid

MAX_SCHEDULE_LENGTH = 200
SAMPLES = 50
"""Due times checked against the minimum interval (the closest pair of a schedule such as
``0,1 * * * *`` need not be its first two)."""
SHAPE = (
    "5 fields, minute hour day-of-month month day-of-week (e.g. '*/15 * * * *', '0 9 * * 1-5'), "
    "or a macro such as '@hourly'"
)


def zone(name: str | None) -> tzinfo:
    """The schedule's IANA time zone (UTC when None); 422 when unknown."""
    if name is None:
        return UTC
    if not name or len(name) > 64:
        raise Invalid(f"timezone {name!r} is not an IANA time zone name (e.g. 'Europe/Paris').")
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        raise Invalid(
            f"timezone {name!r} is not an IANA time zone name (e.g. 'America/New_York')."
        ) from None


def _seconds_first(schedule: str) -> bool:
    return len(schedule.split()) == 6


def _iterator(schedule: str, start: datetime) -> croniter:
    return croniter(schedule, start, second_at_beginning=_seconds_first(schedule))


def next_after(schedule: str, timezone: str | None, after: datetime) -> datetime:
    """The first due time strictly after ``after`` (in UTC), in the schedule's time zone.

    Raises ValueError (``croniter``'s errors) when there is none."""
    start = after.astimezone(zone(timezone))
    found = _iterator(schedule, start).get_next(datetime)
    assert isinstance(found, datetime)
    return found.astimezone(UTC)


def check(schedule: str, timezone: str | None, min_interval: float, now: datetime) -> datetime:
    """Check a client's schedule (422 that says what to send); returns its first due time."""
    zone(timezone)
    fields = schedule.split()
    if len(schedule) > MAX_SCHEDULE_LENGTH or not fields:
        raise Invalid(f"schedule must be a cron expression: {SHAPE}.")
    if len(fields) == 6 and min_interval >= 60:
        raise Invalid(
            f"schedule {schedule!r} has 6 fields (seconds first): this server's schedules have "
            f"minute resolution; send {SHAPE}."
        )
    if len(fields) not in (1, 5, 6) or (len(fields) == 1 and not fields[0].startswith("@")):
        raise Invalid(f"schedule {schedule!r} is not a cron expression: send {SHAPE}.")
    try:
        if not croniter.is_valid(schedule, second_at_beginning=_seconds_first(schedule)):
            raise ValueError("not a valid expression")
        it = _iterator(schedule, now.astimezone(zone(timezone)))
        times = [it.get_next(datetime) for _ in range(SAMPLES)]
    except Exception as err:  # croniter's errors, and whatever odd input makes it raise
        raise Invalid(
            f"schedule {schedule!r} is not a cron expression that ever fires ({err}): send {SHAPE}."
        ) from None
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    if gaps and min(gaps) < min_interval:
        raise Invalid(
            f"schedule {schedule!r} fires every {min(gaps):g} s at times; this server allows "
            f"at most one run per {min_interval:g} s per schedule "
            "(THREADLINE_CRON_MIN_INTERVAL_SECONDS). Send a sparser schedule."
        )
    first = times[0]
    assert isinstance(first, datetime)
    return first.astimezone(UTC)
