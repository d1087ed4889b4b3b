"""Hostile upstreams for the loopback fake: what the worker must bound per call.

Each is a `HostileReply`: instead of a `FakeReply` body, the server hands the
TLS socket to its ``writer``, which writes the response head and body itself and
never stops on its own (only when the client goes away or the fake shuts down).
The writer records what happened in a `Tally` (bytes written, when the client
was last seen reading): the tests read the client's bound from the server side.

Test code only. The modes, as measured before the fix through the real proxy:

- ``huge``: an announced 256 MiB body (+513 MB worker RSS),
- ``unannounced``: the same body with no length, delimited by the close,
- ``gzip_bomb``: ``Content-Encoding: gzip``, ~1 MiB inflating to 1 GiB (+2 GB),
- ``endless``: an endless chunked body (~130 MB/s of growth),
- ``drip``: a small announced body, one byte every 0.5 s (the 3 s per-phase
  timeout never fires while bytes flow),
- ``drip_head``: the same before the body: the status line and 4 KiB of
  headers, one byte every 0.5 s.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .replies import FakeReply, RecordedRequest

__all__ = ["HOSTILE_MODES", "HostileReply", "Tally", "hostile_behaviour"]

Writer = Callable[[socket.socket, threading.Event], None]

_CHUNK = 64 * 1024
_HUGE = 256 * 1024 * 1024
_BOMB = 1024 * 1024 * 1024
_DRIP_EVERY_S = 0.5
_SEND_TIMEOUT_S = 5.0
# Looks like the start of a completion, so nothing refuses it for its first bytes.
_PREFIX = b'{"id":"chatcmpl-hostile","object":"chat.completion","choices":[{"message":{"content":"'


@dataclass(frozen=True)
class HostileReply(FakeReply):
    """A reply the server does not format: ``writer`` owns the connection."""

    writer: Writer | None = None


@dataclass
class Tally:
    """What a hostile writer managed to send, and until when (monotonic)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    started_at: float | None = None
    last_write_at: float | None = None
    ended_at: float | None = None
    bytes_written: int = 0
    peer_gone: bool = False

    def wrote(self, n: int) -> None:
        with self.lock:
            self.bytes_written += n
            self.last_write_at = time.monotonic()


def _head(status_and_headers: list[tuple[str, str]]) -> bytes:
    lines = ["HTTP/1.1 200 OK", *(f"{k}: {v}" for k, v in status_and_headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _filler() -> Iterator[bytes]:
    yield _PREFIX
    block = b"a" * _CHUNK
    while True:
        yield block


def _bomb() -> Iterator[bytes]:
    # Compressed lazily, a MiB of zeros at a time: the client that refuses at the
    # headers costs the fake almost nothing.
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip container
    zeros = bytes(1024 * 1024)
    for _ in range(_BOMB // len(zeros)):
        piece = z.compress(zeros)
        if piece:
            yield piece
    yield z.flush()


def _writer(
    tally: Tally,
    head: bytes,
    body: Iterator[bytes],
    *,
    chunked: bool,
    drip: bool,
    drip_head: bool = False,
) -> Writer:
    def write(sock: socket.socket, stop: threading.Event) -> None:
        sock.settimeout(_SEND_TIMEOUT_S)
        with tally.lock:
            tally.started_at = time.monotonic()
        try:
            if drip_head:  # the status line and headers themselves, byte by byte
                for i in range(len(head)):
                    if stop.wait(_DRIP_EVERY_S):
                        return
                    sock.sendall(head[i : i + 1])
                    tally.wrote(1)
            else:
                sock.sendall(head)
                tally.wrote(len(head))
            for piece in body:
                if stop.is_set():
                    return
                pieces = (piece[i : i + 1] for i in range(len(piece))) if drip else iter((piece,))
                for p in pieces:
                    data = b"%x\r\n%s\r\n" % (len(p), p) if chunked else p
                    if drip and stop.wait(_DRIP_EVERY_S):
                        return
                    sock.sendall(data)
                    tally.wrote(len(data))
        except OSError:
            with tally.lock:
                tally.peer_gone = True
        finally:
            with tally.lock:
                tally.ended_at = time.monotonic()

    return write


HOSTILE_MODES = ("huge", "unannounced", "gzip_bomb", "endless", "drip", "drip_head")


def hostile_behaviour(mode: str, tally: Tally) -> Callable[[RecordedRequest], FakeReply]:
    """The behaviour for one hostile ``mode`` (each request gets a fresh body)."""
    if mode not in HOSTILE_MODES:
        raise ValueError(f"unknown hostile mode {mode!r}; expected one of {HOSTILE_MODES}")

    def behaviour(req: RecordedRequest) -> FakeReply:
        json_type = ("content-type", "application/json")
        if mode == "huge":
            head = _head([json_type, ("content-length", str(_HUGE))])
            w = _writer(tally, head, _filler(), chunked=False, drip=False)
        elif mode == "unannounced":
            head = _head([json_type, ("connection", "close")])
            w = _writer(tally, head, _filler(), chunked=False, drip=False)
        elif mode == "gzip_bomb":
            head = _head(
                [json_type, ("content-encoding", "gzip"), ("transfer-encoding", "chunked")]
            )
            w = _writer(tally, head, _bomb(), chunked=True, drip=False)
        elif mode == "endless":
            head = _head([json_type, ("transfer-encoding", "chunked")])
            w = _writer(tally, head, _filler(), chunked=True, drip=False)
        elif mode == "drip":
            head = _head([json_type, ("content-length", "4096")])
            w = _writer(tally, head, _filler(), chunked=False, drip=True)
        else:  # drip_head
            head = _head([json_type, ("content-length", "4096")] + [("x-pad", "a" * 64)] * 64)
            w = _writer(tally, head, _filler(), chunked=False, drip=False, drip_head=True)
        return HostileReply(writer=w)

    return behaviour
