"""Settings from the environment, through helpers that reject bad values loudly.

Modelled on healthchecks' envbool: a typo in a deployment variable should stop the
process at start-up with a message naming the variable, not surface later as odd behaviour.
"""
from __future__ import annotations

import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of true/false/1/0/yes/no/on/off, got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


# DRF reads only the first letter of the period ("5/mango" would be five a minute), so
# accept the spellings its docs name and nothing else.
_RATE = re.compile(r"(\d+)/(s|sec|second|m|min|minute|h|hour|d|day)")


def env_rate(name: str, default: str) -> str:
    """A DRF throttle rate, "N/period": 300/min, 20/s, 5000/hour, 100000/day."""
    value = (os.environ.get(name) or default).strip()
    match = _RATE.fullmatch(value)
    if not match or int(match.group(1)) < 1:
        raise ImproperlyConfigured(f"{name} must be a rate like 300/min (N/s, N/min, N/hour or N/day with N >= 1), got {value!r}")
    return value
