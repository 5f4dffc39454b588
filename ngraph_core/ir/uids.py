"""Process-unique ids for the ops that must never be merged (variables, placeholders, random ops)."""

from __future__ import annotations

import itertools

_uids = itertools.count()


def next_uid() -> int:
    """A process-unique integer for ops that must never be merged (variables, placeholders)."""
    return next(_uids)
