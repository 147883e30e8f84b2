"""Characters no path segment, query parameter or form field of ours takes."""
from __future__ import annotations

import re

# C0 controls, DEL and C1 controls (Unicode category Cc). One spelling both Python's re and the
# OpenAPI schema's ECMA-262 patterns read.
CONTROL_CHARACTER_CLASS = "[\\u0000-\\u001f\\u007f-\\u009f]"
CONTROL_CHARACTER = re.compile(CONTROL_CHARACTER_CLASS)
# An OpenAPI `pattern` for a string without any of them.
NO_CONTROL_CHARACTERS = f"^[^{CONTROL_CHARACTER_CLASS[1:-1]}]*$"
