"""What the service checks and converts without its extra: the token's length, and the
JSON shape of a Monitor's snapshot (``GET /snapshot``).

Imports: the standard library only.
"""

from __future__ import annotations

__all__ = ["MIN_TOKEN_BYTES", "MAKE_TOKEN", "check_token", "snapshot_json", "segments_by_key"]

#: Shortest token accepted: 16 bytes (128 bits when random, as
#: ``python -c "import secrets; print(secrets.token_urlsafe(32))"`` makes them) are out of
#: reach of guessing over HTTP; a shorter one is refused at start.
MIN_TOKEN_BYTES = 16
#: The command that makes a good token, named when a token is refused.
MAKE_TOKEN = ("python -c \"import secrets; print(secrets.token_urlsafe(32))\" > token.txt")


def snapshot_json(snap: dict) -> dict:
    """A Monitor's snapshot in the shape of ``GET /snapshot``: ``segments`` becomes a
    list of entries, each with its ``segment`` value (null for the whole stream, a list
    for a segment of several fields), in the snapshot's order, since segment keys
    (None, numbers, tuples) are not JSON object keys. :func:`segments_by_key` is its
    inverse. Runtime complexity: `O(segments)`.

    >>> snap = {"n": 3, "segments": {None: {"segment": None, "n": 3},
    ...                              ("fr", "ios"): {"segment": ("fr", "ios"), "n": 1}}}
    >>> snapshot_json(snap)["segments"]
    [{'segment': None, 'n': 3}, {'segment': ['fr', 'ios'], 'n': 1}]
    >>> segments_by_key(snapshot_json(snap)["segments"]) == snap["segments"]
    True
    """
    out = dict(snap)
    segs = snap.get("segments")
    if isinstance(segs, dict):
        out["segments"] = [dict(entry, segment=_segment_json(entry.get("segment", key)))
                           for key, entry in segs.items()]
    return out


def _segment_json(key):
    return list(key) if isinstance(key, tuple) else key


def segments_by_key(segments: list) -> dict:
    """``/snapshot``'s list of segment entries as ``Monitor.snapshot()["segments"]``
    holds them: a dict by segment value (a list becomes a tuple, in the entry too)."""
    out = {}
    for entry in segments:
        key = entry.get("segment")
        key = tuple(key) if isinstance(key, list) else key
        out[key] = dict(entry, segment=key)
    return out


def check_token(token, where: str = "token") -> None:
    """Refuse (ValueError, one line) a token that is not a string of at least
    :data:`MIN_TOKEN_BYTES` UTF-8 bytes; None (no token) passes.

    >>> check_token("correct-horse-battery-staple")
    >>> check_token("s3cret")
    Traceback (most recent call last):
    ...
    ValueError: token of 6 bytes: a token needs at least 16 bytes; make one with python -c "import secrets; print(secrets.token_urlsafe(32))" > token.txt
    """
    if token is None:
        return
    if not isinstance(token, str) or not token:
        raise ValueError(f"{where} must be a non-empty string or None")
    n = len(token.encode("utf-8"))
    if n < MIN_TOKEN_BYTES:
        raise ValueError(f"{where} of {n} bytes: a token needs at least {MIN_TOKEN_BYTES} "
                         f"bytes; make one with {MAKE_TOKEN}")
