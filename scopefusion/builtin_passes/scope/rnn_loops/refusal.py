"""The refusal of a loop the recurrent-loop pass does not fuse."""
from __future__ import annotations


class LoopRefused(Exception):
    """The loop is not a recurrence this pass fuses; the message says why."""
