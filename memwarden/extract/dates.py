"""Dates in plain words ("by Friday", "on March 3rd", "in two weeks", "tomorrow"), resolved against the
message's own time, so a plan's memory expires after its day instead of lingering as if still ahead.

Deterministic: the reference time is the message's timestamp (or the time the conversation was received),
never the clock at extraction, so a retried extraction resolves the same dates.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MON = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_DAY = re.compile(rf"\b{_MON}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.I)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\b", re.I)
_THE_NTH = re.compile(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b", re.I)
_WEEKDAY = re.compile(r"\b(?:(next|this|on|by|until|before)\s+)?(" + "|".join(WEEKDAYS) + r")\b", re.I)
_RELATIVE = re.compile(
    r"\bin\s+(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few)\s+(day|week|month|year)s?\b",
    re.I,
)
_NEXT_UNIT = re.compile(r"\b(next|this)\s+(week|month|year|weekend)\b", re.I)
_END_OF = re.compile(r"\b(?:end of|by the end of)\s+(?:the\s+)?(week|month|year|day)\b", re.I)
_SIMPLE = re.compile(r"\b(today|tonight|tomorrow|day after tomorrow)\b", re.I)
_SEASON = re.compile(r"\b(?:(next|this|in the|in|by)\s+)(spring|summer|autumn|fall|winter)\b", re.I)
_BARE_MONTH = re.compile(rf"\b(?:(next|this|in|by|until|end of|early|late|mid)\s+){_MON}\b(?!\s*\d)", re.I)
SEASON_END = {"spring": (5, 31), "summer": (8, 31), "autumn": (11, 30), "fall": (11, 30), "winter": (2, 28)}

DATE_WORDS = re.compile(
    "|".join(
        p.pattern
        for p in (
            _ISO,
            _MONTH_DAY,
            _DAY_MONTH,
            _THE_NTH,
            _WEEKDAY,
            _RELATIVE,
            _NEXT_UNIT,
            _END_OF,
            _SIMPLE,
            _SEASON,
            _BARE_MONTH,
        )
    ),
    re.I,
)
"""Any date expression this module resolves (the extractor's cue that a statement is dated)."""


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name.lower()[:3]))


def _end_of_day(day: datetime) -> datetime:
    return day.replace(hour=23, minute=59, second=59, microsecond=0)


def _future_date(ref: datetime, month: int, day: int) -> datetime | None:
    """That month and day, this year or (if already past) next year."""
    for year in (ref.year, ref.year + 1):
        try:
            candidate = ref.replace(year=year, month=month, day=day)
        except ValueError:
            return None
        if _end_of_day(candidate) >= ref:
            return candidate
    return None


def _count(word: str) -> int:
    word = word.lower().removeprefix("a ").strip() if word.lower() not in ("a", "an") else word.lower()
    if word.isdigit():
        return int(word)
    return _NUMBERS.get(word, 1)


def resolve(text: str, ref: datetime | None = None) -> datetime | None:
    """The end of the first day `text` names, relative to `ref` (aware, UTC by default); None without one."""
    ref = (ref or datetime.now(UTC)).astimezone(UTC)
    if m := _ISO.search(text):
        try:
            return _end_of_day(datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC))
        except ValueError:
            return None
    if m := _MONTH_DAY.search(text):
        found = _future_date(ref, _month(m[1]), int(m[2]))
        return _end_of_day(found) if found else None
    if m := _DAY_MONTH.search(text):
        found = _future_date(ref, _month(m[2]), int(m[1]))
        return _end_of_day(found) if found else None
    if m := _SIMPLE.search(text):
        word = m[1].lower()
        days = {"today": 0, "tonight": 0, "tomorrow": 1, "day after tomorrow": 2}[word]
        return _end_of_day(ref + timedelta(days=days))
    if m := _RELATIVE.search(text):
        n = _count(m[1])
        unit = {"day": 1, "week": 7, "month": 30, "year": 365}[m[2].lower()]
        return _end_of_day(ref + timedelta(days=n * unit))
    if m := _WEEKDAY.search(text):
        target = WEEKDAYS.index(m[2].lower())
        ahead = (target - ref.weekday()) % 7
        if (m[1] or "").lower() == "next" or ahead == 0:
            ahead = ahead or 7
        return _end_of_day(ref + timedelta(days=ahead))
    if m := _END_OF.search(text):
        unit = m[1].lower()
        days = {
            "day": 0,
            "week": 6 - ref.weekday(),
            "month": 30 - min(ref.day, 30),
            "year": 365 - ref.timetuple().tm_yday,
        }
        return _end_of_day(ref + timedelta(days=max(0, days[unit])))
    if m := _NEXT_UNIT.search(text):
        which, unit = m[1].lower(), m[2].lower()
        rest = {
            "week": 6 - ref.weekday(),
            "weekend": 6 - ref.weekday(),
            "month": 30 - min(ref.day, 30),
            "year": 365 - ref.timetuple().tm_yday,
        }[unit]
        step = {"week": 7, "weekend": 7, "month": 30, "year": 365}[unit] if which == "next" else 0
        return _end_of_day(ref + timedelta(days=max(0, rest) + step))
    if m := _SEASON.search(text):
        month, day = SEASON_END[m[2].lower()]
        found = _future_date(ref, month, day)
        if found is not None and (m[1] or "").lower() == "next" and (found - ref).days < 180:
            found = found.replace(year=found.year + 1)
        return _end_of_day(found) if found else None
    if m := _BARE_MONTH.search(text):
        month = _month(m[2])
        last = 28 if month == 2 else 30 if month in (4, 6, 9, 11) else 31
        found = _future_date(ref, month, last)
        if found is not None and (m[1] or "").lower() == "next" and found.month == ref.month:
            found = found.replace(year=found.year + 1)
        return _end_of_day(found) if found else None
    if m := _THE_NTH.search(text):
        day = int(m[1])
        month = ref.month if day >= ref.day else ref.month % 12 + 1
        found = _future_date(ref, month, day)
        return _end_of_day(found) if found else None
    return None
