"""JSON a caller sent that the service parses itself: a job's JSON body, an upload's `metadata`
and `access` form fields, a token's header and claims.

`json.loads` follows nesting with the interpreter's recursion, so a few thousand `[` raise
RecursionError, which no `except ValueError` catches: it escaped as a 500. `parse_json` turns
it into the `json.JSONDecodeError` every caller already handles, so JSON nested too deeply is
refused as JSON the service cannot read (FastAPI's own bodies answer 400 the same way).
"""

from __future__ import annotations

import json

TOO_DEEP = "nested too deeply"


def parse_json(raw: str | bytes) -> object:
    """`json.loads(raw)`; JSONDecodeError (a ValueError) for bad or too deeply nested JSON."""
    try:
        value: object = json.loads(raw)
    except RecursionError:
        raise json.JSONDecodeError(TOO_DEEP, raw if isinstance(raw, str) else "", 0) from None
    return value
