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

Nesting is bounded (:data:`MAX_DEPTH` levels of arrays and objects), so that a body of
``[[[[...`` cannot exhaust the parser's recursion or the validation's patience:

>>> decode_events(b'[{"label": 1, "score": 0.9, "x": ' + b'[' * 40 + b']' * 40 + b'}]')
Traceback (most recent call last):
...
streameval.service.body.BadRequest: event 0: JSON nested deeper than 32 levels

String values of the fields that stay in the service's state (ids, segment values,
label strings) are bounded in bytes when :func:`decode_events` is given
:func:`field_limits`: a body holding a longer one is refused whole, naming the event,
the field and the limit, before anything is validated or kept:

>>> limits = field_limits(id="id", segment="country", label="label", max_segment_bytes=8)
>>> decode_events(b'[{"country": "fr"}, {"country": "a-very-long-name"}]', limits=limits)
Traceback (most recent call last):
...
streameval.service.body.BadRequest: event 1: segment field 'country': 16 bytes, more than the limit of 8 bytes

Imports: the standard library, orjson when installed, and :mod:`streameval.validation`
(the byte limits).
"""

from __future__ import annotations

import json
import reprlib

try:  # the optional "fast" extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

from streameval.validation import (
    MAX_ID_BYTES,
    MAX_LABEL_BYTES,
    MAX_SEGMENT_BYTES,
    ValidationError,
    check_text_bytes,
)

__all__ = ["BadRequest", "decode_events", "field_limits", "check_limits", "NDJSON_TYPES", "JSON_TYPES",
           "MAX_DEPTH"]

#: Content types read as one JSON document per line.
NDJSON_TYPES = frozenset(
    ["application/x-ndjson", "application/ndjson", "application/jsonl",
     "application/x-jsonlines", "application/jsonlines", "application/json-lines"]
)
#: Content types a ``POST`` may carry: JSON and the NDJSON family. Anything else (the
#: ``application/x-www-form-urlencoded``, ``multipart/form-data`` and ``text/plain`` of
#: HTML forms, or no type at all) is refused, so that a web page cannot make a browser
#: post to the service without a CORS preflight, which the service never grants.
JSON_TYPES = frozenset(["application/json"]) | NDJSON_TYPES

#: Deepest nesting of arrays and objects in a body (a JSON array of events is 1 level,
#: each event 2, an array inside an event 3, ...). Events are flat records: 32 leaves
#: room for structured fields while refusing the ``[[[[...`` bodies that make a
#: recursive parser fail (Python's :mod:`json` at about 1 000 levels, orjson at 1 024).
MAX_DEPTH = 32


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


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header, lower case, without parameters.

    >>> media_type("Application/JSON; charset=utf-8"), media_type(None)
    ('application/json', '')
    """
    return (content_type or "").split(";", 1)[0].strip().lower()


def _too_deep(index=None, **detail) -> BadRequest:
    return BadRequest(f"JSON nested deeper than {MAX_DEPTH} levels", index=index, **detail)


def _loads(data):
    """Parse JSON with orjson when installed; what it refuses is re-read with :mod:`json`
    (as the log sources do), so that ``NaN`` is reported by validation as "score is
    NaN" and malformed JSON gets :mod:`json`'s message and position. Nesting beyond
    the parsers' recursion limits raises :class:`RecursionError`."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(data)


def _check_depth(events: list, base: int, raw: bytes, first: int = 0, **detail) -> None:
    """Raise :class:`BadRequest` naming the first event nested deeper than
    :data:`MAX_DEPTH` (``base`` is the level of each event object: 1 alone, 2 in an
    array; ``first`` is the index of ``events[0]`` in the body).

    Runtime complexity: `O(len(raw))` in C when no event holds an array or object (the
    common case: fewer brackets in ``raw`` than containers already counted), else
    `O(values)` over the events' values.
    """
    # every array or object in the body has an opening bracket in it; strings can only
    # add brackets, so this many or fewer means no event holds a container
    if raw.count(b"{") + raw.count(b"[") <= len(events) + base - 1:
        return
    for i, e in enumerate(events, first):
        stack = [(v, base + 1) for v in e.values() if type(v) is dict or type(v) is list]
        while stack:
            v, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise _too_deep(i, **detail)
            for x in (v.values() if type(v) is dict else v):
                if type(x) is dict or type(x) is list:
                    stack.append((x, depth + 1))


_JSONError = (ValueError,)  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors


def _json_error_detail(e) -> dict:
    pos = getattr(e, "pos", None)
    return {} if pos is None else {"position": pos}


def _reason(e) -> str:
    msg = getattr(e, "msg", None) or str(e)
    return f"malformed JSON: {msg}"


def field_limits(*, id=None, segment=None, label=None, max_id_bytes: int = MAX_ID_BYTES,
                 max_segment_bytes: int = MAX_SEGMENT_BYTES,
                 max_label_bytes: int = MAX_LABEL_BYTES) -> tuple:
    """The byte limits of :func:`decode_events` for these field names: ``id`` and
    ``label`` one name or None, ``segment`` a name, a sequence of names or None.
    Returns ``((field, what, limit), ...)``; ``what`` names the limit in errors
    (``id``, ``segment``, ``label``). Limits must be ints >= 1.

    >>> field_limits(id="id", segment=("country", "device"), max_segment_bytes=64)
    (('id', 'id', 1024), ('country', 'segment', 64), ('device', 'segment', 64))
    """
    segments = () if segment is None else (segment,) if isinstance(segment, str) else segment
    out = []
    for names, what, limit in (((id,), "id", max_id_bytes),
                               (tuple(segments), "segment", max_segment_bytes),
                               ((label,), "label", max_label_bytes)):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_{what}_bytes = {limit!r}: must be an int >= 1")
        out.extend((name, what, limit) for name in names if name is not None)
    return tuple(out)


def check_limits(events: list, limits: tuple, size: int) -> None:
    """Raise :class:`BadRequest` naming the first event whose string value of a bounded
    field is over its limit (``limits`` from :func:`field_limits`; ``size`` is the
    body's length: a JSON string decodes to at most as many UTF-8 bytes as its text
    takes in the body, so a field whose limit is at least ``size`` needs no look).

    Runtime complexity: `O(events x bounded fields)` dictionary lookups, plus an
    encoding of the strings whose length leaves the answer open.
    """
    for field, what, limit in limits:
        if limit >= size:
            continue
        quarter = limit // 4  # a character takes at most 4 bytes in UTF-8
        for i, e in enumerate(events):
            v = e.get(field)
            if type(v) is str and len(v) > quarter:
                try:
                    check_text_bytes(v, f"{what} field {field!r}", limit, index=i)
                except ValidationError as err:
                    raise BadRequest(f"{err.name}: {err.reason}", index=i, field=field,
                                     limit=limit) from None


def decode_events(body: bytes, content_type: str | None = None, limits: tuple = ()) -> list:
    """Parse a request body into a list of event objects (dicts not yet validated).

    A JSON object is one event, a JSON array is a list of events, and NDJSON (one
    object per line; chosen by an NDJSON content type, or when the body is not one
    JSON document) is a list too. Blank NDJSON lines are skipped and do not count
    as events. Runtime complexity: `O(len(body))`.

    Raises :class:`BadRequest` naming the event index (or the position in the body),
    also for nesting deeper than :data:`MAX_DEPTH` and for a string over its byte
    limit in ``limits`` (:func:`field_limits`; none by default).
    """
    events = _decode(body, content_type)
    if limits:
        check_limits(events, limits, len(body))
    return events


def _decode(body: bytes, content_type: str | None) -> list:
    ctype = media_type(content_type)
    if not body.strip():
        raise BadRequest("empty body (expected a JSON object, a JSON array or NDJSON)")
    if ctype not in NDJSON_TYPES:
        try:
            doc = _loads(body)
        except RecursionError:
            raise _too_deep() from None
        except _JSONError as e:
            # one document followed by more lines: NDJSON without its content type
            if body.strip().count(b"\n") == 0:
                raise BadRequest(_reason(e), **_json_error_detail(e)) from None
        else:
            if isinstance(doc, dict):
                _check_depth([doc], 1, body)
                return [doc]
            if isinstance(doc, list):
                # (the usual array holds dicts only: one C pass says so)
                for i, o in enumerate(doc if set(map(type, doc)) - {dict} else ()):
                    if not isinstance(o, dict):
                        _check_depth([{"": o}], 1, b"[[", first=i)  # too deep says so
                        raise BadRequest(f"not a JSON object: {_short(o)}", index=i)
                _check_depth(doc, 2, body)
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
        except RecursionError:
            raise _too_deep(i, line=lineno) from None
        except _JSONError as e:
            raise BadRequest(_reason(e), index=i, line=lineno) from None
        if not isinstance(o, dict):
            raise BadRequest(f"not a JSON object: {_short(o)}", index=i, line=lineno)
        _check_depth([o], 1, line, first=i, line=lineno)
        events.append(o)
    return events


def _short(o, limit: int = 60) -> str:
    """A short repr of a JSON value, safe for deep nesting (reprlib stops at 3 levels)."""
    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother, r.maxlong = 3, limit, limit, limit
    try:
        s = r.repr(o)
    except ValueError:  # an int over Python's digit limit
        s = f"<{type(o).__name__}>"
    return s if len(s) <= limit else s[: limit - 3] + "..."
