"""The base of the status enumerations: an integer code whose members carry their messages.

Every iterative algorithm of the package says whether and why it stopped with a member of one
such enumeration (the pattern of optimistix's ``RESULTS``): GAMP-RIE's
:class:`aim_tutorial.amp_kernel.Status`, the state evolution's
:class:`aim_tutorial.state_evolution.SEStatus`, gradient descent's :class:`aim_tutorial.gd.GDStatus`.
A member is an ``int`` (it compares, sorts and travels through ``jnp.where`` as its code) with a
``message``, the sentence that says what the code means.
"""

from __future__ import annotations

import enum

__all__ = ["Coded"]


class Coded(enum.IntEnum):
    """An ``IntEnum`` whose members are declared as ``NAME = code, "message"``.

    Example:
        >>> class Toy(Coded):
        ...     DONE = 0, "done: every step was run"
        ...     FAILED = 1, "failed: the loss is not finite"
        >>> Toy(1), Toy.FAILED.message, int(Toy.DONE)
        (<Toy.FAILED: 1>, 'failed: the loss is not finite', 0)
    """

    def __new__(cls, value: int, message: str):
        member = int.__new__(cls, value)
        member._value_ = value
        member.message = message
        return member
