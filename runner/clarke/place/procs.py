"""Role processes: started inside a namespace (`ip netns exec`, which execs, so the PID
is the role's own), output to a log file in the testbed's run dir, in their own session
(a Ctrl-C to the runner does not reach them), stopped by PID only: SIGTERM, then SIGKILL
after a timeout. A PID is only signalled while its start time still matches the one
recorded, so a recycled PID is never touched.

A child that must not outlive the process that started it (`Children.spawn(...,
die_with_parent=True)`) gets a parent-death signal (prctl PR_SET_PDEATHSIG, SIGTERM),
set in the child between fork and exec, so also when this process is killed (SIGKILL)
and stops nothing itself. The kernel sends it when the *thread* that forked the child
ends, not the process (prctl(2)): such children are forked by one thread kept for the
process's whole life (an agent's requests each run in a thread that ends with the
request). `ip netns exec` execs the command in its own process, and exec keeps the
setting (`ip` is neither set-user-ID nor has file capabilities): the signal reaches
the command itself."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from clarke import sh
from clarke.errors import EnvironmentProblem
from clarke.place.netns import exec_argv


class Proc(BaseModel):
    """A process a testbed started, as its state file records it. `start_time` (field
    22 of /proc/PID/stat, clock ticks since boot) tells this process from a later one
    that got the same PID."""

    model_config = ConfigDict(extra="forbid")

    role: str
    name: str
    pid: int
    start_time: int
    argv: list[str]
    log: str


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the third (the state) on, None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after it.
    return raw[raw.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot), None if gone or a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks."""
    fields = _stat(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])


def alive(proc: Proc) -> bool:
    return start_time(proc.pid) == proc.start_time


# Role processes this runner started, kept so that their exit status is collected (no
# zombies) and Python does not warn about a Popen collected while its child runs: a
# testbed's processes outlive the `clarke testbed up` that started them by design.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_DEATH_SIGNAL = signal.SIGTERM
# The one thread that forks the children that die with this process (see the module's
# note); made at the first such spawn, it lives until the interpreter exits.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clarke-spawner")


def _die_with(parent: int) -> Callable[[], None]:
    """The child's last step before exec: the parent-death signal, then a check that
    `parent` is still its parent (one that died before the prctl sent no signal, and
    will send none: the child is gone at once instead of left running)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(1)

    return preexec


def start(role: str, name: str, ns: str, argv: Sequence[str], log: Path) -> Proc:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"# {sh.render(exec_argv(ns, argv))}\n".encode())
        out.flush()
        popen = sh.spawn(
            exec_argv(ns, argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _CHILDREN[popen.pid] = popen
    st = start_time(popen.pid)
    if st is None:
        popen.wait()
        del _CHILDREN[popen.pid]
        raise EnvironmentProblem(f"{name} exited at once ({popen.returncode}): see {log}")
    return Proc(role=role, name=name, pid=popen.pid, start_time=st, argv=list(argv), log=str(log))


def tail(path: str | Path, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_ready(proc: Proc, ready: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not alive(proc):
            _reap(proc.pid)
            raise EnvironmentProblem(
                f"{proc.name} ({proc.role}) exited during start-up; its log {proc.log} ends:\n"
                + tail(proc.log)
            )
        if ready():
            return
        if time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"{proc.name} ({proc.role}) not ready after {timeout:.0f} s; its log "
                f"{proc.log} ends:\n" + tail(proc.log)
            )
        time.sleep(0.05)


def wait_until(ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"{what} not ready after {timeout:.0f} s")
        time.sleep(0.05)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def stop_pids(pids: dict[int, int | None], timeout: float = 5) -> None:
    """Stop processes {pid: recorded start time (None: check it now)}: SIGTERM, wait,
    SIGKILL what is left. Only PIDs whose start time still matches are signalled."""
    live = {}
    for pid, st in pids.items():
        now = start_time(pid)
        if now is not None and (st is None or now == st):
            live[pid] = now
    for pid in live:
        signal_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        for pid in list(live):
            _reap(pid)
            if start_time(pid) != live[pid]:
                del live[pid]
        time.sleep(0.05)
    for pid, st in live.items():
        if start_time(pid) == st:
            signal_pid(pid, signal.SIGKILL)
    # Collect the exit status of those this runner started (no zombies, no warnings).
    for pid in pids:
        child = _CHILDREN.pop(pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=2)
        else:
            _reap(pid)


def stop(procs: Sequence[Proc], timeout: float = 5) -> None:
    stop_pids({p.pid: p.start_time for p in procs}, timeout)


@dataclass
class Children:
    """Processes a role's implementation runs in its place. Their output goes where the
    role's own goes (its log file on netns, the container's output on compose); they
    are stopped by PID."""

    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        log: Path | None = None,
        die_with_parent: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start argv; its output to `log` (appended) if given, else to ours.
        `die_with_parent`: it gets SIGTERM when this process dies, however it dies
        (the module's note)."""

        def run(**kwargs: object) -> subprocess.Popen[bytes]:
            if not die_with_parent:
                return sh.spawn(argv, stdin=subprocess.DEVNULL, env=env, **kwargs)
            preexec = _die_with(os.getpid())
            return _SPAWNER.submit(
                sh.spawn, argv, stdin=subprocess.DEVNULL, env=env, preexec_fn=preexec, **kwargs
            ).result()

        if log is None:
            popen = run()
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as out:
                out.write(f"# {sh.render(argv)}\n".encode())
                out.flush()
                popen = run(stdout=out, stderr=subprocess.STDOUT)
        self.procs[name] = popen
        return popen

    def started(
        self,
        name: str,
        ready: Callable[[], bool],
        what: str,
        timeout: float,
        said: Callable[[], str],
    ) -> None:
        """Wait for the child `name`, just spawned, to be `ready`. If it exits first or is
        not ready within `timeout` s, it is stopped and EnvironmentProblem names `what`
        (and, where it exited, what it `said`: its log's end)."""
        popen = self.procs[name]
        try:
            wait_until(lambda: popen.poll() is not None or ready(), what, timeout)
        except EnvironmentProblem:
            self.stop(name)
            raise
        if popen.poll() is not None:
            self.stop(name)
            words = said()
            raise EnvironmentProblem(
                f"{what} exited during start-up ({popen.returncode})"
                + (f": {words}" if words else "")
            )

    def exited(self) -> str | None:
        """Which child has exited, and how, if any."""
        for name, popen in self.procs.items():
            if popen.poll() is not None:
                return f"{name} exited with {popen.returncode}"
        return None

    def stop(self, name: str | None = None) -> None:
        """Stop one child, or all of them."""
        chosen = {n: p for n, p in self.procs.items() if name is None or n == name}
        live = {p.pid: start_time(p.pid) for p in chosen.values() if p.poll() is None}
        stop_pids(live)
        for n, popen in chosen.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=5)
            del self.procs[n]
