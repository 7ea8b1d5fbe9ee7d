"""Deterministic, correlated sampling of scoring targets.

Every scorer binding samples a target (a run by its trace id, a conversation by its id) by
comparing one value derived from the id with its ratio. Because every binding uses the same
value for a target, decisions are correlated: a 10 % binding scores a subset of the targets of a
50 % binding. Because the value depends only on the id, decisions are the same after a restart
and on every daemon of a cluster.

For a trace id (32 hex characters) the value follows OpenTelemetry's ``TraceIdRatioBased``
sampler, which decides from the lower 64 bits of the trace id (the random part under W3C
Trace Context level 2), so tracescorer agrees with head sampling configured at the same ratio.
Any other id (conversation ids are arbitrary strings) is hashed with SHA-256 first.
"""

from __future__ import annotations

import hashlib
import math
import re

_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
# 53 bits: the precision of a float. Dropping the low 11 bits of the 64-bit value keeps the
# result exactly representable and strictly below 1 (a plain ``x / 2**64`` rounds the top
# 2**10 values up to 1.0, which a ratio of 1 would then miss).
_SHIFT = 64 - 53
_SCALE = float(2**53)


def sample_value(target_id: str) -> float:
    """The target's position in [0, 1), the same for every binding and every process.

    A 32-hex-character id is read as a trace id: its lower 64 bits over 2**64 (OpenTelemetry's
    ``TraceIdRatioBased`` rule, at float precision). Anything else: the first 8 bytes of the
    SHA-256 of its UTF-8 encoding over 2**64.
    """
    if _TRACE_ID.fullmatch(target_id):
        bits = int(target_id[16:], 16)
    else:
        bits = int.from_bytes(hashlib.sha256(target_id.encode("utf-8")).digest()[:8], "big")
    return (bits >> _SHIFT) / _SCALE


def is_sampled(target_id: str, ratio: float) -> bool:
    """Whether a binding sampling ``ratio`` (0..1) of its targets scores this one.

    ``ratio`` 0 never samples, 1 always does. Raises ``ValueError`` for a ratio outside [0, 1].
    """
    if math.isnan(ratio) or not 0.0 <= ratio <= 1.0:
        raise ValueError(f"sampling ratio must be between 0 and 1, got {ratio!r}")
    return sample_value(target_id) < ratio
