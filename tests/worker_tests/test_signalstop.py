"""The stop the SIGTERM/SIGINT handlers set takes no lock (`kexpr.worker.signalstop`).

Observed: a supervisor sent SIGTERM did not stop within 30 s. Its handler called
`threading.Event.set` while the main thread was inside `threading.Event.wait` on
the same event, holding the lock ``set`` needs: the process waited on itself.
The flood below hangs a `threading.Event` in a few milliseconds; `SignalStop`
takes no lock anywhere, so it cannot."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading

from kexpr.worker.signalstop import SignalStop

# The handler sets the stop the main loop is waiting on, a fresh one each time
# (a set stop returns at once); a forked child sends the signals.
_FLOOD = textwrap.dedent(
    """
    import os, signal, sys
    from kexpr.worker.signalstop import SignalStop
    stops = [SignalStop()]
    def on_signal(signum, frame):
        stops[-1].set()
        stops.append(SignalStop())
        del stops[:-2]
    signal.signal(signal.SIGUSR1, on_signal)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        for _ in range(int(sys.argv[1])):
            os.kill(parent, signal.SIGUSR1)
        os._exit(0)
    while os.waitpid(child, os.WNOHANG) == (0, 0):
        stops[-1].wait(0.0001)
    print("stopped")
    """
)


def test_a_flood_of_signals_setting_the_stop_never_hangs_the_waiting_thread() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FLOOD, "20000"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
        check=True,
    )
    assert done.stdout.split() == ["stopped"]


def test_wait_times_out_unset_and_returns_at_once_once_set() -> None:
    stop = SignalStop()
    assert not stop.is_set()
    assert stop.wait(0.001) is False
    stop.set()
    assert stop.is_set() and stop.wait(None) is True and stop.wait(0) is True


def test_set_from_another_thread_wakes_a_waiter_without_a_timeout() -> None:
    stop, woke = SignalStop(), threading.Event()

    def waiter() -> None:
        if stop.wait(None):
            woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    stop.set()
    t.join(30)
    assert woke.is_set() and not t.is_alive()


def test_many_sets_never_block_on_a_full_pipe() -> None:
    stop = SignalStop()
    for _ in range(200_000):  # far more than a pipe holds
        stop.set()
    assert stop.wait(0) is True


def test_its_descriptors_are_close_on_exec_and_released_when_collected() -> None:
    stop = SignalStop()
    pipe = {fd: os.fstat(fd).st_ino for fd in (stop._r, stop._w)}
    assert all(os.get_inheritable(fd) is False for fd in pipe)
    del stop
    gc.collect()
    for fd, ino in pipe.items():
        try:
            assert os.fstat(fd).st_ino != ino  # the number reused by another file
        except OSError:
            pass  # closed
