"""Serializer pieces every API input uses: unknown fields refused by name, and JSON fields held to
the shape limits (inputs.json_limits) and to strings PostgreSQL can store."""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from django.db import models
from rest_framework import serializers
from rest_framework.utils import html

from inputs import json_limits

# What a browser's HTML form adds to its fields (the browsable API's forms).
FORM_KEYS = frozenset({"csrfmiddlewaretoken"})
LISTED_FIELDS_AT_MOST = 15


class RejectUnknownFields:
    """A 400 naming each field the serializer does not declare (a misspelt `expires_days` is not
    silently dropped). Read-only fields are declared, so a body read back from a GET is accepted.
    Nested serializers with this mixin name their own unknown fields under their own key."""

    def to_internal_value(self, data):
        unknown = self._unknown_field_errors(data)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, Mapping):
                raise serializers.ValidationError({**unknown, **exc.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value

    def _unknown_field_errors(self, data: Any) -> dict[str, list[str]]:
        if not isinstance(data, Mapping):
            return {}  # DRF's own "expected a dictionary" error follows
        names = set(data)
        if html.is_html_input(data):
            # Form input spells nested fields "workload.prompt_tokens" and list items "chips[0]".
            names = {re.split(r"[.\[]", name, maxsplit=1)[0] for name in names} - FORM_KEYS
        unknown = sorted(str(name) for name in names if name not in self.fields)
        return {name: [self._unknown_field_message(name)] for name in unknown}

    def _unknown_field_message(self, name: str) -> str:
        writable = [field_name for field_name, field in self.fields.items() if not field.read_only]
        close = difflib.get_close_matches(name, writable, n=1, cutoff=0.8)
        if close:
            return f"Unknown field; did you mean {close[0]}?"
        if len(writable) <= LISTED_FIELDS_AT_MOST:
            return f"Unknown field; the fields here are {', '.join(writable)}."
        return "Unknown field; the schema at /api/schema/ lists the fields."


class LimitedJSONField(serializers.JSONField):
    """A JSON value (parsed, or a JSON string from a form) within the shape limits and without NUL."""

    def to_internal_value(self, data):
        if self.binary or getattr(data, "is_json_string", False):
            try:
                data = json_limits.loads(data.decode() if isinstance(data, bytes) else data)
            except json_limits.JSONLimitError as exc:
                raise serializers.ValidationError(str(exc)) from None
            except ValueError:
                self.fail("invalid")
        else:
            try:
                json_limits.check(data)
            except json_limits.JSONLimitError as exc:
                raise serializers.ValidationError(str(exc)) from None
            data = super().to_internal_value(data)
        if json_limits.has_nul(data):
            raise serializers.ValidationError("A string in it contains a NUL character, which cannot be stored.")
        return data


class StrictSerializer(RejectUnknownFields, serializers.Serializer):
    """The base of every API input serializer."""


class StrictModelSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """The base of every API model serializer: model JSON fields become LimitedJSONFields."""

    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping, models.JSONField: LimitedJSONField}
