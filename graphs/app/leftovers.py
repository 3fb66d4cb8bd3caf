"""What a stopped command leaves running, ended before it exits: the processes it started (and
theirs: the MCP servers of batch workers, a local Ray) and multiprocessing's helpers (its fork
server and resource tracker).

A process ended by its parent's exit is not gone at that exit: a worker's MCP server reads the
end of its stdin, the fork server and the resource tracker the end of their pipes, each once it
is scheduled again, and on a loaded machine that is seconds later. A stop
(``reactgraph.app.interrupts``) ends them first and waits for them, so none outlives the
command; a command that ends by itself ends the helpers. The process tree is read from
``/proc`` (Linux); elsewhere only the helpers are ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

_TERM_WAIT_S = 10  # bounds against a process that will not end, not timings
_KILL_WAIT_S = 10
_POLL_S = 0.01
_PASSES = 5  # looks for processes started during a stop (see ``end``)


def descendants(root: int | None = None) -> dict[int, str]:
    """The descendants of ``root`` (default: this process) now, each after its parent and with
    its start time (so a pid the system has given to another process since is never taken for
    it); empty without ``/proc``."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for pid, parent, started in _processes():
        parents.setdefault(parent, []).append((pid, started))
    found, todo = {}, [os.getpid() if root is None else root]
    while todo:
        for pid, started in parents.get(todo.pop(), []):
            if pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def end(known: dict[int, str]) -> None:
    """End ``known`` (from ``descendants``) and every descendant there is now, but the resource
    tracker: SIGTERM, then SIGKILL for those still alive after a while, waiting until each is
    gone (or is a zombie: dead, its exit not yet read by its parent). The command's own threads
    run on meanwhile and may start a process after a look (an MCP server for its tool listing):
    it looks again until a look finds none alive (at most ``_PASSES`` times)."""
    for _ in range(_PASSES):
        if not _ended(known):
            return
        known = {}


def terminate_below(root: int) -> None:
    """SIGTERM the descendants of ``root`` (not ``root`` itself), each before its parent: a
    process sees its parent end only once its own end is pending (a worker's MCP server, whose
    worker ended first, wrote its reply into the closed pipe: a traceback on the terminal)."""
    for pid, started in reversed(descendants(root).items()):
        if _alive(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)


def _ended(known: dict[int, str]) -> bool:
    """One pass of ``end``: whether it found any process alive to end."""
    tracker = _tracker_pid()
    found = False
    for sig, wait in ((signal.SIGTERM, _TERM_WAIT_S), (signal.SIGKILL, _KILL_WAIT_S)):
        known = {**known, **descendants()}  # one started meanwhile too
        if tracker is not None:
            known.pop(tracker, None)  # it ends by itself, freeing what the workers left
        alive = [pid for pid, started in known.items() if _alive(pid, started)]
        found = found or bool(alive)
        if not _signalled(alive, known, sig, wait):
            break
    return found


def _signalled(alive: list[int], known: dict[int, str], sig: int, wait: float) -> list[int]:
    """Send ``sig`` to each of ``alive`` and wait up to ``wait`` seconds for them to end:
    those still alive then (``known`` gives each one's start, so a reused pid is not it)."""
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
    deadline = time.monotonic() + wait
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        alive = [pid for pid in alive if _alive(pid, known[pid])]
    return alive


# CPython's internals: multiprocessing's helper processes (``tests/test_pool.py`` pins them), each
# as its module, its object there, and that object's names for the pipe the helper reads to its
# end and for its pid. The fork server first: it holds the resource tracker's pipe too.
_HELPERS = (
    ("multiprocessing.forkserver", "_forkserver", "_forkserver_alive_fd", "_forkserver_pid"),
    ("multiprocessing.resource_tracker", "_resource_tracker", "_fd", "_pid"),
)


def helpers() -> None:
    """End multiprocessing's fork server and resource tracker, if this process started them,
    and wait for each: it exits when the last process holding its pipe has (the workers are
    gone by now; the tracker after unlinking what they left registered); killed if it does
    not. Either would otherwise outlive the command by as long as it takes to be scheduled."""
    for module_name, name, fd_name, pid_name in _HELPERS:
        module = sys.modules.get(module_name)
        if module is not None:
            _end_helper(getattr(module, name), fd_name, pid_name)


def _end_helper(own: Any, fd_name: str, pid_name: str) -> None:
    if not own._lock.acquire(timeout=_TERM_WAIT_S):
        return
    try:
        fd, pid = getattr(own, fd_name), getattr(own, pid_name)
        if fd is None or pid is None:
            return
        setattr(own, fd_name, None)
        setattr(own, pid_name, None)
        with contextlib.suppress(OSError):
            os.close(fd)
        if not _waited(pid, _TERM_WAIT_S):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _waited(pid, _KILL_WAIT_S)
    finally:
        own._lock.release()


def spare_uname() -> None:
    """Let ``platform`` know the processor without running ``uname -p`` (Linux). The OpenAI
    client asks ``platform.platform()`` on its first request, on the command's thread; a
    Ctrl-C while that child runs left it to outlive the command, as the stop cannot see a
    process that thread starts after it looked. ``processor`` is a cached property of the
    cached ``uname()``; on Linux the answer is blank (``uname -p`` says unknown), and
    ``platform.platform()`` reads the same either way."""
    if sys.platform.startswith("linux"):
        import platform

        platform.uname().processor = ""  # type: ignore[misc]


def _tracker_pid() -> int | None:
    module = sys.modules.get("multiprocessing.resource_tracker")
    return None if module is None else module._resource_tracker._pid


def _waited(pid: int, within: float) -> bool:
    """Whether the child ``pid`` ended (and was reaped) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:  # reaped already
            return True
        time.sleep(_POLL_S)
    return False


def _alive(pid: int, started: str) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[0] != "Z"


def _processes() -> list[tuple[int, int, str]]:
    """``(pid, parent pid, start time)`` of every process there is (Linux: ``/proc``)."""
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    found = []
    for pid in entries:
        stat = _stat(pid)
        if stat is not None:
            found.append((pid, stat[1], stat[2]))
    return found


def _stat(pid: int) -> tuple[str, int, str] | None:
    """A process's state, parent pid and start time, from ``/proc/PID/stat`` (None: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), fields[19]
