"""Containment of a candidate process: what it can reach, what it may use, and what is left of
it afterwards.

The checker (`agent.harness.worker`) starts each candidate as `CandidateProcess`: a fork of
the checker taken right after it imported torch and before it touched any task (or a fresh
`python -I` where no such moment exists), in a session of its own, in a job folder of its own
(its working folder, HOME, TMPDIR and every cache), with a clean environment, its output on a
pipe the checker reads with a cap, and its requests and answers on two private pipes. Before the
candidate's code is imported, `contain()` (run in the candidate as its first act) applies:

| as root (CI) | not root |
| --- | --- |
| a fresh unprivileged uid and gid for the job (no supplementary groups, no new privileges), so the checkout, the checker and the caller are other users' files and processes | a user and mount namespace where every mount is read-only except the job folder, capabilities dropped (when the kernel allows unprivileged user namespaces; otherwise nothing) |
| the interpreter's folders behind a directory that uid cannot enter (pyenv under `/root`) exposed alone in a mount namespace | the checker made non-dumpable, so a process of the same uid cannot ptrace it or read its memory |

and in both cases: `RLIMIT_DATA` (host memory; an allocation past it fails in the candidate),
`RLIMIT_FSIZE`, no core files, `RLIMIT_NPROC` (as root: per job uid), death with the checker
(`PR_SET_PDEATHSIG`). On a GPU the device memory is limited in the candidate through
`torch.cuda.set_per_process_memory_fraction`, which the candidate could raise again: it is a
guard against accidents, not against a cheat. Not enforced anywhere: disk space in the job
folder and in world-writable folders, network access, CPU time beyond the job's timeout; and
when not root, signals and ptrace aimed at the caller (same uid; the checker refuses them).

After the candidate has exited, `CandidateProcess.finish` kills what it left running (its
session, its process group, every process of the job's uid, and, in the checker, which is a
child subreaper, every orphan that came back to it) and reports it as `harness.escaped`, and
as root removes files of the job's uid outside the job folder (in /tmp, /var/tmp, /dev/shm) and
reports them the same way. `Snapshot` keeps the harness's and the task's own files and restores
and reports any that changed (the fallback where nothing else stops a write).
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from agent.harness.failure import CandidateFailed

ROOT = Path(__file__).resolve().parents[2]
UID_BASE = 1_900_000_000  # job uids: far from any account's, never in /etc/passwd
UID_SPAN = 1 << 20
TAIL_CHARS = 20_000  # of the candidate's output kept for the record
RECORD_MARK = '{"kir_record"'
NPROC = 4096
FILE_BYTES = 8 << 30
# variables the candidate inherits; everything else of the caller's environment stays out
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "LD_LIBRARY_PATH", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "CC", "CXX")  # fmt: skip
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "HIP_", "ROCM_", "ROCR_", "HSA_", "TRITON_", "TORCH_", "PYTORCH_", "KIR_")

# ---- Linux calls (ctypes: the standard library has no unshare, mount or capset) ----

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 4, 38, 36
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64 (the generic table)
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if x is None else x.encode() for x in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]  # fmt: skip


def _mount_setattr(path: str, set_: int, clear: int) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    _libc.syscall.restype = ctypes.c_long
    r = _libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(), ctypes.c_uint(AT_RECURSIVE),
        ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
    )  # fmt: skip
    _check(int(r), f"mount_setattr {path}")


def _drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets (in a user namespace the process holds
    them all until then, enough to make its mounts writable again)."""
    import platform

    number = SYS_CAPSET.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"capset: unknown machine {platform.machine()}")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(int(_libc.syscall(ctypes.c_long(number), header, data)), "capset")


# ---- the plan (decided by the checker) and contain() (run by the candidate) ----


def _traversable(path: Path) -> bool:
    """Whether a user of no group of the file's can enter this folder."""
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return True  # a folder that is not there blocks nothing


def needed_paths() -> list[str]:
    """What the candidate's interpreter reads: its prefixes, its import path, the checkout."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(ROOT)}
    paths.add(str(Path(os.path.realpath(sys.executable)).parent))
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    # the target folders outside the checkout (in the folders $KIR_TARGETS names): the candidate
    # imports its target's code from there
    for root in filter(os.path.isdir, os.environ.get("KIR_TARGETS", "").split(os.pathsep)):
        paths.update(str(p) for p in Path(root).iterdir() if (p / "__init__.py").is_file())
    return sorted(os.path.realpath(p) for p in paths)


def exposures(paths: list[str]) -> dict[str, list[str]]:
    """{folder another user cannot enter: [its entries on the way to a needed path]}."""
    blocked: dict[str, set[str]] = {}
    for p in paths:
        parts = Path(p).parts
        for i in range(1, len(parts)):
            parent = Path(*parts[:i])
            if not _traversable(parent):
                blocked.setdefault(str(parent), set()).add(parts[i])
    return {k: sorted(v) for k, v in sorted(blocked.items(), key=lambda kv: kv[0].count("/"))}


def contain(plan: dict[str, Any]) -> str:
    """Apply the plan in this process (the candidate, before any of its code is imported);
    returns what was enforced: "uid", "userns" or "none" (with the reason after a colon)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != plan["checker"]:
        os._exit(70)  # the checker died before the line above: nobody is waiting
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, FILE_BYTES)]
    if plan.get("memory"):
        limits.append((resource.RLIMIT_DATA, int(plan["memory"])))
    for which, value in limits:
        resource.setrlimit(which, (value, value))
    folder = plan["folder"]
    mode = plan["mode"]
    try:
        if mode == "uid":
            _become_job_user(plan)
        elif mode == "userns":
            _read_only_world(folder)
    except OSError as err:
        mode = f"none: {err}"  # reported in the record's `containment`: the job says what held
    os.chdir(folder)
    os.umask(0o077)
    return mode


def _become_job_user(plan: dict[str, Any]) -> None:
    expose = plan.get("expose") or {}
    if expose:
        _unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        # entries are opened before anything is mounted over their folders, then bound back
        fds = {(d, e): os.open(os.path.join(d, e), os.O_PATH) for d, entries in expose.items() for e in entries}
        for folder, entries in expose.items():
            _mount("tmpfs", folder, "tmpfs", 0, "mode=0711,size=1m")
            for e in entries:
                target = os.path.join(folder, e)
                fd = fds[(folder, e)]
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(target)
                else:
                    open(target, "x").close()
                _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        for fd in fds.values():
            os.close(fd)
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid programs (su, mount) cannot give root back
    os.setgroups([])
    os.setgid(plan["uid"])
    os.setuid(plan["uid"])
    if os.getuid() != plan["uid"] or os.geteuid() != plan["uid"]:
        raise OSError(errno.EPERM, "the job uid did not take")


def _read_only_world(folder: str) -> None:
    uid, gid = os.getuid(), os.getgid()
    _unshare(CLONE_NEWUSER | CLONE_NEWNS)
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(folder, folder, None, MS_BIND | MS_REC)
    _mount_setattr("/", MOUNT_ATTR_RDONLY, 0)
    _mount_setattr(folder, 0, MOUNT_ATTR_RDONLY)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _drop_capabilities()


# ---- the checker's side ----


_subreaper = False


def harden_checker() -> None:
    """The checker's own protection (called in the checker process, never in a caller):
    non-dumpable, so a candidate of the same uid can neither ptrace it nor read its memory; a
    child subreaper, so a candidate's orphans come back to it and can be found."""
    with contextlib.suppress(OSError):
        prctl(PR_SET_DUMPABLE, 0)
    global _subreaper
    with contextlib.suppress(OSError):
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        _subreaper = True


def _lock_dir() -> Path:
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / "kir-harness-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def claim_uid() -> tuple[int, int]:
    """(a job uid no other job holds, the fd of its lock): a uid per job, so that two
    candidates running at once cannot reach each other and a scan by uid finds one job's
    processes only."""
    folder = _lock_dir()
    for _ in range(64):
        uid = UID_BASE + random.randrange(UID_SPAN)
        fd = os.open(folder / str(uid), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            same = os.stat(folder / str(uid)).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the lock's file was removed by its last holder after we opened it
            os.close(fd)
            continue
        return uid, fd
    raise OSError(errno.EAGAIN, "no free job uid")


def release_uid(uid: int, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(_lock_dir() / str(uid))
    os.close(fd)


def userns_available() -> bool:
    try:
        return int(Path("/proc/sys/user/max_user_namespaces").read_text()) > 0
    except (OSError, ValueError):
        return False


class Sandbox:
    """A job folder, a plan for `contain()` and the candidate's environment."""

    def __init__(self, *, memory: int | None, env: dict[str, str] | None = None):
        self.uid: int | None = None
        self._lock: int | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="kir-candidate-"))
        for sub in ("tmp", "cache", "triton", "inductor"):
            (self.folder / sub).mkdir()
        if os.geteuid() == 0:
            self.uid, self._lock = claim_uid()
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, self.uid, self.uid)
            mode = "uid"
        else:
            mode = "userns" if userns_available() else "none: not root and no user namespaces"
        self.plan: dict[str, Any] = {
            "mode": mode,
            "uid": self.uid,
            "folder": str(self.folder),
            "memory": memory,
            "checker": os.getpid(),
            "expose": exposures(needed_paths()) if mode == "uid" else {},
        }
        base = {k: v for k, v in os.environ.items() if k in ENV_KEEP or k.startswith(ENV_PREFIXES)}
        base.update(env or {})
        f = str(self.folder)
        base.update(
            HOME=f, TMPDIR=f"{f}/tmp", USER="kir-candidate", LOGNAME="kir-candidate", KIR_CACHE_DIR=f"{f}/cache",
            XDG_CACHE_HOME=f"{f}/cache", TRITON_CACHE_DIR=f"{f}/triton", TORCHINDUCTOR_CACHE_DIR=f"{f}/inductor",
            PYTHONDONTWRITEBYTECODE="1",
        )  # fmt: skip
        self.env = base

    def close(self) -> None:
        def unlock_and_retry(fn, path, _exc):
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(path), 0o700)
                os.chmod(path, 0o700)
                fn(path)

        shutil.rmtree(self.folder, onerror=unlock_and_retry)
        if self._lock is not None:
            release_uid(cast(int, self.uid), self._lock)  # claimed with the lock
            self._lock = None


# ---- processes ----


def processes() -> dict[int, dict[str, Any]]:
    """Every process now: {pid: {ppid, pgrp, sid, uid, state}} (zombies included)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), -1)
        found[int(entry)] = {
            "state": fields[0], "ppid": int(fields[1]), "pgrp": int(fields[2]), "sid": int(fields[3]), "uid": uid,
        }  # fmt: skip
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def belonging(root_pid: int, uid: int | None) -> list[int]:
    """The live processes that belong to a candidate started as `root_pid` (the leader of its
    session): its session and process group, its descendants, the orphans that came back to
    this process when it is the checker (a subreaper, which then has no other children), and
    every process of the job's uid."""
    procs = processes()
    me = os.getpid()
    mine = set()
    for pid, p in procs.items():
        if pid == me or p["state"] in ("Z", "X"):
            continue
        if p["sid"] == root_pid or p["pgrp"] == root_pid or (uid is not None and p["uid"] == uid):
            mine.add(pid)
        elif uid is None and _subreaper and p["ppid"] == me:
            # an orphan of the candidate's, come back to the checker; with a uid of its own the
            # candidate's processes are all found by the uid, and the checker's own children (the
            # compile workers of torch.compile, timing the peers) are not the candidate's
            mine.add(pid)
    changed = True
    while changed:  # descendants of any of them
        changed = False
        for pid, p in procs.items():
            if pid not in mine and pid != me and p["ppid"] in mine | {root_pid} and p["state"] not in ("Z", "X"):
                mine.add(pid)
                changed = True
    return sorted(mine)


def kill_all(root_pid: int, uid: int | None, rounds: int = 50) -> None:
    """Stop, then kill, until nothing belonging is left (a stopped process cannot fork)."""
    for _ in range(rounds):
        pids = belonging(root_pid, uid)
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        time.sleep(0.01)
        reap()
    reap()


def reap() -> None:
    """Collect this process's dead children (orphans that came back to the subreaper; nothing
    in a process that is not the checker, whose children are its own business)."""
    while _subreaper:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# ---- files ----

STRAY_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")


def strays(uid: int, exclude: Path, roots: tuple[str, ...] = STRAY_ROOTS, depth: int = 6) -> list[str]:
    """Files and folders owned by `uid` in the places any user may write, outside `exclude`."""
    found: list[str] = []

    def walk(folder: str, level: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if Path(entry.path) == exclude:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                found.append(entry.path)
            elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and level < depth:
                walk(entry.path, level + 1)

    for r in roots:
        walk(r, 0)
    return found


def remove(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


class Snapshot:
    """The bytes of files the verdict depends on (the harness, the task), to see and undo a
    change made during a job."""

    def __init__(self, paths: list[Path]):
        self.saved: dict[Path, bytes] = {}
        for p in paths:
            with contextlib.suppress(OSError):
                if p.is_file():
                    self.saved[p] = p.read_bytes()

    @staticmethod
    def of(task_folder: Path | None, extra: Sequence[Path] = ()) -> Snapshot:
        """The harness's sources, the task folder's files (its first 200, of at most 1 MB: a
        reference, its metadata, its programs), and `extra`."""
        here = Path(__file__).resolve().parent
        files = [*here.glob("*.py"), *(here.parent / "tasks").glob("*.py"), *extra]
        if task_folder is not None and task_folder.is_dir():
            with contextlib.suppress(OSError):
                found = sorted(p for p in task_folder.iterdir() if p.is_file() and p.stat().st_size <= 1 << 20)
                files += found[:200]
        return Snapshot(files)

    def restore(self) -> list[str]:
        """The files that changed (or went), each written back."""
        changed = []
        for p, data in self.saved.items():
            try:
                same = p.read_bytes() == data
            except OSError:
                same = False
            if not same:
                changed.append(str(p))
                with contextlib.suppress(OSError):
                    p.write_bytes(data)
        return changed


# ---- output ----


class TailCapture:
    """Reads a pipe to its end in a thread, keeping the last `TAIL_CHARS` characters and
    noting any line that starts like a harness record."""

    def __init__(self, fd: int, keep: int = TAIL_CHARS):
        self.fd, self.keep = fd, keep
        self.chunks: list[str] = []
        self.kept = 0
        self.total = 0
        self.forged = False
        self._line = ""  # the start of the line being read (enough to recognise the mark)
        self._at_start = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            self._add(decoder.decode(data))
        self._add(decoder.decode(b"", final=True))
        os.close(self.fd)

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        self.chunks.append(text)
        self.kept += len(text)
        while self.kept - len(self.chunks[0]) >= self.keep:
            self.kept -= len(self.chunks.pop(0))
        *ended, rest = text.split("\n")
        for piece in ended:
            self._look(self._line + piece)
            self._line = ""
        self._line = (self._line + rest)[:64]
        self._look(self._line)  # a record need not end its line to be a forgery

    def _look(self, line: str) -> None:
        if line[:64].lstrip().startswith(RECORD_MARK):
            self.forged = True

    def wait(self, timeout: float) -> None:
        self.thread.join(timeout)

    def text(self) -> str:
        text = "".join(self.chunks)[-self.keep :]
        if self.total > len(text):
            text = f"[{self.total - len(text)} characters cut]\n" + text
        return text

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


# ---- the candidate process, seen from the checker ----

# Whether this process may fork candidates: true in a fresh checker that has imported torch and
# run nothing yet (a fork after torch's thread pools have run can deadlock in the child), so
# that a candidate starts without importing torch again; a fresh `python -I` otherwise.
_fork_ok = False


def allow_fork(allowed: bool) -> None:
    global _fork_ok
    _fork_ok = allowed


class _Forked:
    """A forked candidate, with the part of `subprocess.Popen` the checker uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # collected by `reap` after it was killed
                self.returncode = -signal.SIGKILL
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            if self.returncode is not None:
                os.close(self._fd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import select

        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("candidate", cast(float, timeout))  # there is an end
            select.select([self._fd], [], [], left)
        return code


def _fork_candidate(plan: dict[str, Any], env: dict[str, str], out_w: int, serve: Callable[[dict], None]) -> _Forked:
    """The candidate as a fork of this checker: what `python -I -c boot` would do, without
    importing torch again. In the child, before `serve`: a session of its own, its output on
    the pipe, every other descriptor closed (the record pipe, other candidates' pipes and
    locks), the sandbox's environment, no exit handlers of the checker's."""
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return _Forked(pid)
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        keep = {0, 1, 2, plan["fd_in"], plan["fd_out"]}
        for fd in [int(f) for f in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        atexit._clear()
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # computed by the checker: the candidate's is in its folder
        sys.path[0] = str(ROOT)
        serve(plan)
        atexit._run_exitfuncs()  # the candidate's own, as at an interpreter's exit
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - the child must never return into the checker's code
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        os._exit(70)
    os._exit(0)


PIPE_BYTES = 1 << 20  # Linux's default limit for an unprivileged pipe (/proc/sys/fs/pipe-max-size)


def _wide_pipe() -> tuple[int, int]:
    """A pipe of `PIPE_BYTES` where the system allows it: the inputs and outputs of a bench-size
    instance cross in sixteen times fewer turns than through the default 64 KiB."""
    read, write = os.pipe()
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return read, write


class CandidateProcess:
    """One candidate in its sandbox, and the checker's end of its two pipes."""

    def __init__(
        self, *, deadline: float, memory: int | None, serve: Callable[[dict], None], env: dict[str, str] | None = None
    ):
        """`serve` is what a forked candidate runs (`agent.harness.candidate.serve`, which a
        started one reaches through `main`)."""
        self.deadline = deadline
        self.sandbox = Sandbox(memory=memory, env=env)
        req_r, self.req_w = _wide_pipe()
        self.resp_r, resp_w = _wide_pipe()
        out_r, out_w = os.pipe()
        plan = {**self.sandbox.plan, "fd_in": req_r, "fd_out": resp_w}
        boot = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from agent.harness.candidate import main; main()"
        self.proc: _Forked | subprocess.Popen[bytes]
        try:
            if _fork_ok:
                self.proc = _fork_candidate(plan, self.sandbox.env, out_w, serve)
            else:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-c", boot, json.dumps(plan)],
                    stdin=subprocess.DEVNULL, stdout=out_w, stderr=subprocess.STDOUT, pass_fds=(req_r, resp_w),
                    cwd=self.sandbox.folder, env=self.sandbox.env, start_new_session=True,
                )  # fmt: skip
        finally:
            for fd in (req_r, resp_w, out_w):
                os.close(fd)
        os.set_blocking(self.req_w, False)
        self.output = TailCapture(out_r)
        self.containment = self.sandbox.plan["mode"]
        self.finished = False
        self.reply_times: list[float] = []

    @property
    def uid(self) -> int | None:
        return self.sandbox.uid

    def send(self, header: dict[str, Any], payloads: list | None = None) -> None:
        """Send a request without waiting for its answer (`receive` reads it later)."""
        self.request(header, payloads, limit=0, replies=0)

    def receive(self, *, limit: int, replies: int = 1):
        return self.request(None, None, limit=limit, replies=replies)

    def request(self, header: dict[str, Any] | None, payloads: list | None = None, *, limit: int, replies: int = 1):
        """Send one request (unless None) and read its answers: [(header, payloads)]; when each
        arrived is in `reply_times`. A candidate that dies, runs past the deadline or answers
        out of form raises `CandidateFailed`."""
        from agent.harness import wire

        answers = []
        self.reply_times = []
        try:
            if header is not None:
                wire.send(self.req_w, header, payloads, self.deadline)
            for _ in range(replies):
                answers.append(wire.receive(self.resp_r, limit=limit, deadline=self.deadline))
                self.reply_times.append(time.monotonic())
        except wire.Timeout:
            self.kill()
            raise self._failure("timeout", "harness.timeout", "the candidate did not finish within the job's time and was killed",
                                "a kernel that never ends (a wait nobody arrives at, a loop bound never reached)") from None  # fmt: skip
        except wire.Closed:
            raise self._died() from None
        except wire.WireError as err:
            self.kill()
            raise self._failure("run", "harness.protocol", f"the candidate answered out of form: {err}") from None
        return answers

    def _died(self):
        try:
            status = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            status = self.proc.wait()
        if status < 0:
            name = signal.Signals(-status).name if -status in signal.Signals._value2member_map_ else str(-status)
            return self._failure("crash", "harness.crash", f"the candidate process died with signal {name}")
        return self._failure(
            "crash", "harness.no-record", f"the candidate process exited with status {status} before it answered"
        )

    def _failure(self, stage: str, rule: str, message: str, hint: str = ""):
        from kir.diagnostics import Diagnostic

        return CandidateFailed(stage, [Diagnostic(rule, "error", None, message, hint)])

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        kill_all(self.proc.pid, self.uid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def finish(self, linger: float = 1.0) -> list:
        """Ask the candidate to quit, then clean up after it: the `harness.escaped` diagnostics of
        what it left (processes still running once it exited, files outside its folder)."""
        from agent.harness import wire
        from kir.diagnostics import Diagnostic

        if self.finished:
            return []
        self.finished = True
        if self.proc.poll() is None:
            with contextlib.suppress(wire.WireError, OSError):
                wire.send(self.req_w, {"op": "quit"}, None, time.monotonic() + 2)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for fd in (self.req_w, self.resp_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        diags = []
        end = time.monotonic() + linger  # helpers that exit with their parent get a moment to
        left = belonging(self.proc.pid, self.uid)
        while left and time.monotonic() < end:
            time.sleep(0.05)
            reap()
            left = belonging(self.proc.pid, self.uid)
        if left:
            shown = "; ".join(f"{pid}: {command_line(pid)}" for pid in left[:5])
            diags.append(
                Diagnostic(
                    "harness.escaped",
                    "error",
                    None,
                    f"{len(left)} process(es) of the candidate were still running after it exited ({shown}); they were killed",
                    "a candidate may start helpers, but must wait for them",
                )  # fmt: skip
            )
        kill_all(self.proc.pid, self.uid)
        self.output.wait(5)
        if self.uid is not None:
            found = strays(self.uid, self.sandbox.folder)
            if found:
                for p in found:
                    remove(p)
                diags.append(
                    Diagnostic(
                        "harness.escaped",
                        "error",
                        None,
                        f"the candidate wrote outside its job folder: {', '.join(found[:5])} (removed)",
                        "write only in the working folder",
                    )  # fmt: skip
                )
        self.sandbox.close()
        return diags
