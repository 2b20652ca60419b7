"""Request bodies: one JSON event, a JSON array of events, or NDJSON.

Decoding is pure data (a JSON parser, never ``eval`` or pickle) and says where a
malformed body went wrong: the 0-based index of the NDJSON line's event, or the
character position in a JSON document.

>>> decode_events(b'{"label": 1, "score": 0.9, "ts": 5}')
[{'label': 1, 'score': 0.9, 'ts': 5}]
>>> decode_events(b'{"label": 1, "score": 0.9}\\n{"label": 0, "score": 0.1}\\n')
[{'label': 1, 'score': 0.9}, {'label': 0, 'score': 0.1}]
>>> decode_events(b'[{"label": 1, "score": 0.9}, 7]')
Traceback (most recent call last):
...
streameval.service.body.BadRequest: event 1: not a JSON object: 7

Imports: the standard library and orjson when installed; no streameval module.
"""

from __future__ import annotations

import json

try:  # the optional "fast" extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

__all__ = ["BadRequest", "decode_events", "NDJSON_TYPES"]

#: Content types read as one JSON document per line.
NDJSON_TYPES = frozenset(
    ["application/x-ndjson", "application/ndjson", "application/jsonl",
     "application/x-jsonlines", "application/jsonlines", "application/json-lines"]
)


class BadRequest(ValueError):
    """A request the service refuses: HTTP ``status``, ``reason`` and the event ``index``.

    ``index`` is the 0-based position of the first bad event (None when the body as a
    whole is unreadable); ``detail`` holds extra JSON-serialisable context.
    """

    def __init__(self, reason: str, *, index: int | None = None, status: int = 400, **detail):
        self.reason = reason
        self.index = index
        self.status = status
        self.detail = detail
        where = "body" if index is None else f"event {index}"
        super().__init__(f"{where}: {reason}")

    def to_json(self) -> dict:
        """The JSON error body: ``{"error", "index", ...detail}``."""
        return {"error": str(self), "reason": self.reason, "index": self.index, **self.detail}


def _loads(data):
    """Parse JSON with orjson when installed; what it refuses is re-read with :mod:`json`
    (as the log sources do), so that ``NaN`` is reported by validation as "score is
    NaN" and malformed JSON gets :mod:`json`'s message and position."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(data)


_JSONError = (ValueError,)  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors


def _json_error_detail(e) -> dict:
    pos = getattr(e, "pos", None)
    return {} if pos is None else {"position": pos}


def _reason(e) -> str:
    msg = getattr(e, "msg", None) or str(e)
    return f"malformed JSON: {msg}"


def decode_events(body: bytes, content_type: str | None = None) -> list:
    """Parse a request body into a list of event objects (dicts not yet validated).

    A JSON object is one event, a JSON array is a list of events, and NDJSON (one
    object per line; chosen by an NDJSON content type, or when the body is not one
    JSON document) is a list too. Blank NDJSON lines are skipped and do not count
    as events. Runtime complexity: `O(len(body))`.

    Raises :class:`BadRequest` naming the event index (or the position in the body).
    """
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if not body.strip():
        raise BadRequest("empty body (expected a JSON object, a JSON array or NDJSON)")
    if ctype not in NDJSON_TYPES:
        try:
            doc = _loads(body)
        except _JSONError as e:
            # one document followed by more lines: NDJSON without its content type
            if body.strip().count(b"\n") == 0:
                raise BadRequest(_reason(e), **_json_error_detail(e)) from None
        else:
            if isinstance(doc, dict):
                return [doc]
            if isinstance(doc, list):
                for i, o in enumerate(doc):
                    if not isinstance(o, dict):
                        raise BadRequest(f"not a JSON object: {_short(o)}", index=i)
                return doc
            raise BadRequest(
                f"expected a JSON object, a JSON array of objects or NDJSON, got {_short(doc)}"
            )
    events = []
    for lineno, line in enumerate(body.split(b"\n"), 1):
        if not line.strip():
            continue
        i = len(events)
        try:
            o = _loads(line)
        except _JSONError as e:
            raise BadRequest(_reason(e), index=i, line=lineno) from None
        if not isinstance(o, dict):
            raise BadRequest(f"not a JSON object: {_short(o)}", index=i, line=lineno)
        events.append(o)
    return events


def _short(o, limit: int = 60) -> str:
    s = repr(o)
    return s if len(s) <= limit else s[: limit - 3] + "..."
