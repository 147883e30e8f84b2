"""Decoding methods by name: each class registers itself once with @register.

`decoding_from_params` turns the name and parameters of a measured row or an API request
into the method object; the API's list of methods is `method_names()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Resolvers

METHODS: dict[str, type] = {}


def register(cls: type) -> type:
    if cls.method in METHODS:
        raise ValueError(f"decoding method {cls.method!r} is registered twice")
    METHODS[cls.method] = cls
    return cls


def method_names() -> tuple[str, ...]:
    return tuple(METHODS)


def method_class(name: str) -> type:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown decoding {name!r}; expected one of {', '.join(METHODS)}") from None


def decoding_from_params(name: str, params: Mapping[str, Any], resolvers: Resolvers = Resolvers()):
    """The method object for a name and its parameters (the CSV's decoding_params, an API body)."""
    return method_class(name).from_params(params, resolvers)
