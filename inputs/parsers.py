"""The API's JSON parser: DRF's, with the shape limits of inputs.json_limits (settings
REST_FRAMEWORK DEFAULT_PARSER_CLASSES names it). Past a limit: 400 with `detail` saying which."""
from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json as drf_json

from inputs import json_limits


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        parse_constant = drf_json.strict_constant if self.strict else None  # NaN and Infinity are not JSON
        try:
            return json_limits.loads(stream.read().decode(encoding), parse_constant=parse_constant)
        except json_limits.JSONLimitError as exc:
            raise ParseError(f"JSON body refused: {exc}") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
