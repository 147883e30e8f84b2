"""JSON documents of a bounded shape: at most JSON_MAX_DEPTH levels of nested objects and arrays,
at most JSON_MAX_KEYS object keys in all.

The body size limit (config.middleware) bounds the bytes, not the shape: 2 KB of `[` nest 1,000
deep and make json.loads (or any recursive walk after it) raise RecursionError. Parsing here
turns that into a JSONLimitError with a message for people; the walk after the parse is iterative.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from django.conf import settings


class JSONLimitError(ValueError):
    """A JSON document past the depth or key limit; str() is the message for the client."""


def loads(text: str | bytes, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """json.loads, refusing documents past the limits. Raises JSONLimitError for those, ValueError
    (json.JSONDecodeError, UnicodeDecodeError) for text that is not JSON."""
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise JSONLimitError(_too_deep()) from None
    check(value)
    return value


def check(value: Any) -> None:
    """Raise JSONLimitError if an already parsed value is nested too deep or holds too many keys."""
    max_depth, max_keys = settings.JSON_MAX_DEPTH, settings.JSON_MAX_KEYS
    keys = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise JSONLimitError(_too_deep())
        if isinstance(item, dict):
            keys += len(item)
            if keys > max_keys:
                raise JSONLimitError(f"More than {max_keys} object keys in all; a JSON document may hold at most {max_keys}.")
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))


def has_nul(value: Any) -> bool:
    """Whether a NUL character is in any string or key of a parsed value (PostgreSQL stores none in
    text or jsonb). Call check() first: this walk trusts the depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            if any("\x00" in key for key in item if isinstance(key, str)):
                return True
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _too_deep() -> str:
    limit = settings.JSON_MAX_DEPTH
    return f"Nested deeper than {limit} levels; a JSON document may nest objects and arrays at most {limit} deep."
