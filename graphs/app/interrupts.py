"""Ctrl-C for the command line: at any moment, one line saying how to go on, exit 130.

A ``KeyboardInterrupt`` raised into running code lands wherever the main thread happens to be,
and library code on the way (a ``finally`` that returns, an ``except BaseException``, an event
loop turning SIGINT into a cancellation) can end it as a normal return: the user believes the
run stopped, and a script reading the exit code believes it finished. So no code of a command
ever sees one. ``run`` does the command on a thread of its own with SIGINT blocked there (so
also in every thread it starts: the signal always comes to the main thread). The main thread
only waits. On SIGINT it prints the command's hint and ends the process at once, as a kill
would: every step stored so far stays, and what was in flight runs again on resume (the
command's own threads write nothing more once the stop begins: ``locks.halt_writes``).

Until the command says what a stop leaves (``stoppable``), a Ctrl-C waits for it, so that ``ask``
never stops before its thread is recorded; a second Ctrl-C stops it anyway.

A terminal's Ctrl-C goes to every process of its group, so also to batch workers: one that
ended on it, before the main thread had taken its own for a stop, would read as a worker that
died and fail the runs it held. Processes started ``unreached`` never see one: their parent
ends them, and a stop waits for everything the command started to be gone (``leftovers``).

The guard holds from the first line of ``main`` (``hold``: SIGINT blocked until ``run`` takes
it) to the process's end, which the program's own ``main`` makes here (``_end``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from reactgraph.app import leftovers

EXIT_CODE = 130
_DONE, _STOPPABLE = b"\xff", b"\xfe"
_SIGINT = {signal.SIGINT}
_MASKS = hasattr(signal, "pthread_sigmask")  # no signal masks on Windows


class _State:
    """What the main thread needs to stop the command: its hint and what must go with it."""

    def __init__(self) -> None:
        self.hint: str | None = None
        self.cleanups: list[Callable[[], None]] = []
        self.wake: socket.socket | None = None
        self.lock = threading.RLock()  # a signal handler on the main thread may take it too


_state = _State()
_stopping = threading.Event()


def park_if_stopping() -> None:
    """On a command's thread: never return once Ctrl-C ends the process (no failures of it)."""
    if _stopping.is_set():
        threading.Event().wait()


def stoppable(hint: str) -> None:
    """From now on a Ctrl-C stops the command at once and prints ``Interrupted. {hint}`` (a
    Ctrl-C that came earlier stops it now)."""
    with _state.lock:
        _state.hint = hint
        wake = _state.wake
    if wake is not None:
        with contextlib.suppress(OSError):
            wake.send(_STOPPABLE)


@contextlib.contextmanager
def on_stop(cleanup: Callable[[], None]) -> Iterator[None]:
    """Call ``cleanup`` (from the main thread) if Ctrl-C stops the command meanwhile (worker
    processes); once a stop is under way it never returns: nothing starts that it would miss."""
    with _state.lock:
        _state.cleanups.append(cleanup)
    try:
        park_if_stopping()  # the stop sets it before it takes the cleanups
        yield
    finally:
        with _state.lock:
            _state.cleanups.remove(cleanup)


@contextlib.contextmanager
def unreached() -> Iterator[None]:
    """Processes started meanwhile on this thread never get a SIGINT: it stays blocked in them
    from their first instruction (a signal mask goes through fork and exec, and Python never
    unblocks SIGINT). This thread's own mask is as it was afterwards. multiprocessing unblocks
    SIGINT on the thread that first starts its resource tracker (it blocks SIGINT for that
    process, then unblocks it rather than restoring the mask), so the tracker is started first."""
    if not _MASKS:
        yield
        return
    from multiprocessing import resource_tracker  # here: no command's start-up waits for it

    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    try:
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def hold(pending: bool = False) -> None:
    """At the first line of ``main``: SIGINT blocked on the main thread, so that a Ctrl-C from
    here on is pending until ``run`` takes it, never a KeyboardInterrupt on the way in.
    ``pending``: one came just before (raised as this was called): sent again, held so."""
    if threading.current_thread() is threading.main_thread() and _MASKS:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        if pending:
            signal.raise_signal(signal.SIGINT)


def run(command: Callable[[], int], *, ending: bool = False) -> int:
    """``command()`` on a thread of its own; its result (or its exception, raised here), or
    the hint and exit 130 at the first Ctrl-C once it is stoppable (the second in any case).
    ``ending`` (the program's own ``main``): the process ends here (``_end``), with the
    command's exit code. Off the main thread (a test, an embedding program), it is just called."""
    if threading.current_thread() is not threading.main_thread():
        return command()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        if _MASKS:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)  # ignored anyway
        return command()  # started to ignore Ctrl-C (a background job): so it stays
    reader, writer = socket.socketpair()
    reader.setblocking(True)
    writer.setblocking(False)
    outcome: dict[str, Any] = {}

    def body() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        try:
            outcome["code"] = command()
        except BaseException as error:  # raised again on the main thread
            outcome["error"] = error
        finally:
            with contextlib.suppress(OSError):
                writer.send(_DONE)

    previous = signal.signal(signal.SIGINT, lambda *_: None)  # the wakeup byte says it came
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    with _state.lock:
        _state.hint, _state.wake = None, writer
    # A Ctrl-C that came while SIGINT was held (``hold``, or whoever started us) is taken now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
    try:
        threading.Thread(target=body, name="reactgraph-command", daemon=True).start()
        came = _wait(reader)
        if ending:
            _end(outcome, came, reader)
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous)
        with _state.lock:
            _state.wake = None
        reader.close()
        writer.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["code"]


def _wait(reader: socket.socket) -> bool:
    """Until the command ends, and whether a Ctrl-C came that did not stop it yet (one before
    the command was stoppable); a stop (see the module) never returns."""
    interrupts = 0
    while True:
        data = reader.recv(64)
        interrupts += data.count(bytes([signal.SIGINT]))
        if _DONE in data:
            return interrupts > 0
        if interrupts and (_hint() is not None or interrupts > 1):
            _stop(_hint())


def _hint() -> str | None:
    with _state.lock:
        return _state.hint


def _end(outcome: dict[str, Any], came: bool, reader: socket.socket) -> NoReturn:
    """The program's end, the guard in place: what Python does as it exits, then ``os._exit``
    (Python's own exit sets SIGINT back to the default for seconds of teardown on a loaded
    machine). A Ctrl-C meanwhile, or as the command ended (a byte on ``reader`` since ``_wait``
    returned), is the hint and exit 130, as at any other moment."""
    signal.signal(signal.SIGINT, lambda *_: _stop(_hint()))
    reader.setblocking(False)
    with contextlib.suppress(OSError):
        came = came or bytes([signal.SIGINT]) in reader.recv(64)
    if came:
        _stop(_hint())
    code = _exit_code(outcome)
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]  # as Python's exit: non-daemon threads
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()  # the atexit callbacks (logging's flush, multiprocessing's ...)
    leftovers.helpers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(outcome: dict[str, Any]) -> int:
    """The command's exit code, as Python's own exit would make it (printing what it would)."""
    error = outcome.get("error")
    if error is None:
        return outcome["code"]
    if isinstance(error, SystemExit):  # argparse's --help and errors, sys.exit in a command
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        with contextlib.suppress(Exception):
            print(error.code, file=sys.stderr)
        return 1
    with contextlib.suppress(Exception):
        sys.excepthook(type(error), error, error.__traceback__)
    return 1


def _stop(hint: str | None) -> NoReturn:
    """Say how to go on, end what would outlive the process (``leftovers``), and end it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the way out is not interrupted again
    _stopping.set()  # from now on no ``on_stop`` block starts (see there)
    if (locks := sys.modules.get("reactgraph.storage.locks")) is not None:  # a run may write
        locks.halt_writes()  # what the stop does to a run (its tool ended) is not recorded
    running = leftovers.descendants()  # before the workers end: their children are ours then
    text = hint if hint is not None else "Stopped before anything was saved."
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"\nInterrupted. {text}\n")
        sys.stderr.flush()
    with _state.lock:
        cleanups = list(_state.cleanups)
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            cleanup()
    with contextlib.suppress(Exception):
        leftovers.end(running)
    with contextlib.suppress(Exception):
        leftovers.helpers()
    os._exit(EXIT_CODE)
