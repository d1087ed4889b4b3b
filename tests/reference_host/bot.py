"""The Telegram objects the reference hosts' handlers touch, as small fakes.

Tests only. The host's handlers receive a python-telegram-bot ``CallbackQuery``
and await two of its methods: ``answer(text=...)`` (the toast) and
``edit_message_text(text=..., reply_markup=...)`` (the edit of the pressed
message). `RecordingQuery` records both, can be told to fail the edit, and can
run a probe on every call so a test sees what the handler held at that moment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


class EditFailed(Exception):
    """What Telegram raises for a failed edit (a network error, a deleted message)."""


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str


@dataclass
class RecordingQuery:
    """A pressed inline button: ``data`` is its ``callback_data``."""

    data: str
    message: Message = field(default_factory=lambda: Message("501"))
    fail_edit: bool = False
    probe: Callable[[str], None] | None = None  # called with "answer" / "edit"
    answers: list[str | None] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)

    async def answer(self, text: str | None = None) -> None:
        if self.probe is not None:
            self.probe("answer")
        self.answers.append(text)

    async def edit_message_text(self, *, text: str, reply_markup: object = None) -> Message:
        if self.probe is not None:
            self.probe("edit")
        if self.fail_edit:
            raise EditFailed("message to edit not found")
        self.edits.append(text)
        return self.message
