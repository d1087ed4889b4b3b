"""Bad input, said the same way by every ``kexpr`` command.

Rules (docs/cli.md "Bad input"):

1. One line on stderr, exit 2, never a traceback::

       kexpr <command>: <what> <path>: <reason in words> (<enum>)

   ``what`` is the option or argument (``--capsule``, ``--data-root``, ``config``);
   the path is the one the command tried, as given (an unprintable one is shown
   escaped); the words are true for that enum and the enum is fixed (`Problem`).
   With ``--json`` the command also prints ``{"error": {...}}`` on stdout.
2. Nothing of a file's content is ever part of the line: only the path the operator
   typed, the enum and its words.
3. The checks are the ones every command needs, in this order: the path exists
   (``missing``), is not a symbolic link where one is refused (``symlink``), is a
   regular file (``is_directory``, ``not_regular_file``: a FIFO, device or socket is
   opened without blocking and never read), is readable (``permission_denied``),
   within the size bound (``too_large``), not empty (``empty``), not binary
   (``binary``: a NUL byte, which no text or JSON line holds) and, for text read as
   a whole, strict UTF-8 (``not_text``; a JSON-lines input judges each line's
   encoding itself, so one bad line does not hide the others). A data root must be
   a directory (``not_a_directory``) that is not empty (``empty_directory``: no
   worker ever ran there).
"""

from __future__ import annotations

import enum
import json
import os
import stat
import sys
from typing import Final, TextIO

from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow
from kexpr.spool.errors import ReasonError

EXIT_UNUSABLE: Final = 2


class Problem(enum.StrEnum):
    MISSING = "missing"
    SYMLINK = "symlink"
    IS_DIRECTORY = "is_directory"
    NOT_REGULAR_FILE = "not_regular_file"
    NOT_A_DIRECTORY = "not_a_directory"
    PERMISSION_DENIED = "permission_denied"
    TOO_LARGE = "too_large"
    EMPTY = "empty"
    EMPTY_DIRECTORY = "empty_directory"
    BINARY = "binary"
    NOT_TEXT = "not_text"
    IO_ERROR = "io_error"


WORDS: Final[dict[Problem, str]] = {
    Problem.MISSING: "no such file or directory",
    Problem.SYMLINK: "a symbolic link (never followed)",
    Problem.IS_DIRECTORY: "a directory, not a file",
    Problem.NOT_REGULAR_FILE: "not a regular file (a FIFO, device or socket)",
    Problem.NOT_A_DIRECTORY: "not a directory",
    Problem.PERMISSION_DENIED: "permission denied",
    Problem.TOO_LARGE: "larger than this input may be",
    Problem.EMPTY: "an empty file",
    Problem.EMPTY_DIRECTORY: "an empty directory (no worker ever ran here)",
    Problem.BINARY: "a binary file (it holds NUL bytes), not text",
    Problem.NOT_TEXT: "not UTF-8 text",
    Problem.IO_ERROR: "could not be read (I/O error)",
}


class InputRefused(ReasonError[Problem]):
    """A path argument that cannot be used; the enum only, never content."""


def shown(path: os.PathLike[str] | str) -> str:
    """The path as the operator typed it; escaped if it is not printable."""
    text = os.fspath(path)
    if text == "-":
        return "- (standard input)"
    return text if text.isprintable() and text else ascii(text)


def line(prog: str, what: str, path: os.PathLike[str] | str, problem: Problem) -> str:
    return f"{prog}: {what} {shown(path)}: {WORDS[problem]} ({problem.value})"


def refuse(
    prog: str,
    what: str,
    path: os.PathLike[str] | str,
    problem: Problem,
    *,
    json_out: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Rule 1: print the line (and the ``--json`` object) and return exit 2."""
    print(line(prog, what, path, problem), file=stderr or sys.stderr)
    if json_out:
        error = {"input": what, "path": os.fspath(path), "problem": problem.value}
        print(json.dumps({"error": error}, sort_keys=True), file=stdout or sys.stdout)
    return EXIT_UNUSABLE


def _from_read(e: ReadRefused, path: os.PathLike[str] | str) -> Problem:
    if e.problem is ReadProblem.IO_ERROR and not os.path.lexists(path):
        return Problem.MISSING  # ENOTDIR: a parent on the way is a file
    if e.problem is ReadProblem.NOT_REGULAR_FILE:
        try:
            if stat.S_ISDIR(os.stat(path).st_mode):
                return Problem.IS_DIRECTORY
        except OSError:
            pass
    return Problem(e.problem.value)


def read_file(
    path: os.PathLike[str] | str,
    *,
    max_bytes: int,
    text: bool = True,
    lines: bool = False,
    allow_empty: bool = False,
) -> bytes:
    """The whole file, checked by rule 3, or `InputRefused`. ``text``: refuse a
    binary file; unless ``lines``, refuse one that is not UTF-8 as a whole."""
    try:
        data = read_nofollow(path, max_bytes=max_bytes)
    except ReadRefused as e:
        raise InputRefused(_from_read(e, path)) from e
    if not data and not allow_empty:
        raise InputRefused(Problem.EMPTY)
    if text and b"\0" in data:
        raise InputRefused(Problem.BINARY)
    if text and not lines:
        try:
            data.decode("utf-8", "strict")
        except UnicodeDecodeError as e:
            raise InputRefused(Problem.NOT_TEXT) from e
    return data


def data_root_problem(path: os.PathLike[str] | str) -> Problem | None:
    """Rule 3 for a data root; None when it is a directory with something in it."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # ENOTDIR: a parent is a file
        return Problem.MISSING
    except PermissionError:
        return Problem.PERMISSION_DENIED
    except OSError:
        return Problem.IO_ERROR
    if stat.S_ISLNK(st.st_mode):
        return Problem.SYMLINK
    if not stat.S_ISDIR(st.st_mode):
        return Problem.NOT_A_DIRECTORY
    try:
        with os.scandir(path) as entries:
            empty = next(entries, None) is None
    except PermissionError:
        return Problem.PERMISSION_DENIED
    except OSError:
        return Problem.IO_ERROR
    return Problem.EMPTY_DIRECTORY if empty else None


def refuse_unusable_file(
    prog: str, what: str, path: os.PathLike[str] | str, *, max_bytes: int = 16 << 20
) -> int | None:
    """None when ``path`` is a usable text file (rule 3), else exit 2 after the
    line: for a path a command hands on (``--ssl-cert-file``) without reading it
    itself, checked before anything is started."""
    try:
        read_file(path, max_bytes=max_bytes)
    except InputRefused as e:
        return refuse(prog, what, path, e.problem)
    return None


def refuse_unusable_cert_file(prog: str, path: str | None) -> int | None:
    """`refuse_unusable_file` for ``--ssl-cert-file`` when one was given (None
    when it was not): checked before anything starts."""
    return None if path is None else refuse_unusable_file(prog, "--ssl-cert-file", path)
