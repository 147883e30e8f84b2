"""Display filters: units and rounding for people. Formatting only, no planning math."""
from __future__ import annotations

from django import template

register = template.Library()

DASH = "–"


def _number(value):
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _sig(value: float, digits: int = 3) -> str:
    """Three significant digits, no scientific notation for everyday magnitudes."""
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        text = f"{value:,.0f}" if abs(value) >= 1 else f"{value:.2e}"
    return text


@register.filter
def setting(value) -> str:
    """A scheduler setting as given: a list of names joined ("int8, int4"), an empty one "none"; anything else as is."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


@register.filter
def usd(value) -> str:
    """$ amounts: $0.148, $12.3, $1,234."""
    number = _number(value)
    if number is None:
        return DASH
    return f"${number:,.0f}" if abs(number) >= 1000 else f"${_sig(number)}"


@register.filter
def duration(value) -> str:
    """Seconds as ms below one second: 0.0479 -> '47.9 ms', 23.6 -> '23.6 s'."""
    number = _number(value)
    if number is None:
        return DASH
    if abs(number) < 1:
        return f"{_sig(number * 1000)} ms"
    return f"{_sig(number)} s"


@register.filter
def gb(value) -> str:
    """Bytes as decimal GB (1 GB = 10^9 bytes, as the catalog stores them)."""
    number = _number(value)
    if number is None:
        return DASH
    return f"{_sig(number / 1e9)} GB"


@register.filter
def percent(value) -> str:
    """A fraction as a percentage: 0.4616 -> '46.2%'."""
    number = _number(value)
    if number is None:
        return DASH
    return f"{number * 100:.1f}%"


@register.filter
def plain_percent(value) -> str:
    """A number that already is a percentage: 12.345 -> '12.3%'."""
    number = _number(value)
    if number is None:
        return DASH
    return f"{number:.1f}%"


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _scaled(number: float, scales) -> tuple[float, str]:
    """The number in the largest of `scales` ((scale, prefix), largest first) it reaches, and that prefix."""
    return next(((number / scale, prefix) for scale, prefix in scales if abs(number) >= scale), (number, ""))


@register.filter
def si(value, unit: str = "") -> str:
    """SI prefixes: 9.89e14 FLOP/s -> '989 TFLOP/s'; 3.35e12 B/s -> '3.35 TB/s'."""
    number = _number(value)
    if number is None:
        return DASH
    scaled, prefix = _scaled(number, _PREFIXES)
    return f"{_sig(scaled)} {prefix}{unit}".strip()


# Counts of parameters as the field writes them: 70.6 B (billion), not 70.6 G.
_COUNT_SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


@register.filter
def params(value) -> str:
    """A parameter count: 70.6e9 -> '70.6 B parameters'; 671e9 -> '671 B parameters'; 1.04e12 -> '1.04 T parameters'."""
    number = _number(value)
    if number is None:
        return DASH
    scaled, suffix = _scaled(number, _COUNT_SCALES)
    return f"{_sig(scaled)} {suffix} parameters" if suffix else f"{int(number):,} parameters"


@register.filter
def num(value) -> str:
    """Three significant digits (or the value itself if it is not a number)."""
    number = _number(value)
    if number is None:
        return DASH if value in (None, "") else str(value)
    if number.is_integer() and abs(number) < 1e15:
        return f"{int(number):,}"
    return _sig(number)


@register.filter
def get(mapping, key):
    """mapping[key] in a template (dicts keyed by metric name)."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def source_url(source) -> str:
    """The leading http(s) URL of a catalog source string ('' if it does not start with one)."""
    text = str(source or "").strip()
    if not text.startswith(("http://", "https://")):
        return ""
    return text.split()[0].rstrip(",;")


@register.filter
def format_as(value, kind: str) -> str:
    """Write a value as its declared format says (planner/engine/fields.py: num, duration, usd,
    percent, gb, text)."""
    if kind == "text":
        return "—" if value is None else str(value)
    return {"num": num, "duration": duration, "usd": usd, "percent": percent, "gb": gb}[kind](value)
