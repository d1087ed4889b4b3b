"""An exception that is one enum reason and nothing else.

The product never puts content into an exception: a refusal carries an enum, and
its message is that enum's value. `ReasonError` is that shape, declared once; each
refusal names its own enum (``ReasonError[ReadProblem]``) so the type checker keeps
the reasons of one refusal apart from another's.
"""

from __future__ import annotations

import enum
from typing import Final, Generic, TypeVar

__all__ = ["ReasonError"]

R = TypeVar("R", bound=enum.Enum)


class ReasonError(Exception, Generic[R]):
    """Raised with one enum member; ``str(e)`` is its value, ``e.reason`` (or
    ``e.problem``, the name the refusals of paths and identities use) the member."""

    def __init__(self, reason: R) -> None:
        super().__init__(reason.value)
        self.reason: Final[R] = reason

    @property
    def problem(self) -> R:
        return self.reason
