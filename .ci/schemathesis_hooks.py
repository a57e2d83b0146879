"""Schemathesis hooks for .ci/schemathesis (loaded through SCHEMATHESIS_HOOKS)."""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """The import body is NDJSON text; the spec describes it as a string."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    # out-of-spec (negative) bodies: one JSON value per line
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(item) + "\n" for item in items).encode("utf-8")
