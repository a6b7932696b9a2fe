"""A run directory: who may write it, what it may already hold, and how its files are made.

* **One writer.** A process that runs or resumes a run holds an exclusive `flock` on
  `RUN_DIR/.lock` for its whole life (the OS drops it when the process dies, however it dies,
  so a stale lock is simply taken over). A second `run --out` or `resume` of the same
  directory exits 2 naming the PID that holds it; `attach` takes no lock (it reads the journal
  and steers through its control queue).
* **A new run goes into a new or empty directory**: never over a user's own files.
* **Private.** Prompts and answers are the user's data: directories 0700, files 0600, whatever
  the umask (a shared SSH host has other users).
* Files are written under a temporary name and renamed into place; temporary files a killed
  process left behind are removed by the next writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
from pathlib import Path

from .errors import InputError

try:  # POSIX only: the package's metadata says so, and a run says so in words (`require_posix`)
    import fcntl
    import resource
except ImportError:  # Windows: no flock, no rlimits
    fcntl = None  # type: ignore[assignment]
    resource = None  # type: ignore[assignment]

JOURNAL_NAME = "journal.sqlite"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
LOCK_NAME = ".lock"
TEMP_SUFFIX = ".tmp"


class RunDirBusy(InputError):
    """Another live process writes this run directory."""


def temp_name(name: str) -> str:
    """The temporary name `name` is written under by this process (`.NAME.PID.tmp`)."""
    return f".{name}.{os.getpid()}{TEMP_SUFFIX}"


_LEFTOVER = re.compile(r"^\..+\.(\d+)\.tmp(-journal|-wal|-shm)?$")


def _is_leftover(path: Path) -> bool:
    return _LEFTOVER.match(path.name) is not None


def require_posix() -> None:
    """InputError (exit 2, before any file is made) where the one-writer lock cannot be taken: the
    run directory's guarantees rest on `flock`, which Windows does not have."""
    if fcntl is None:
        raise InputError.single(
            "this system",
            "platform",
            "swarm-tui runs on POSIX systems only (Linux, macOS, BSD; on Windows, in WSL): a run directory "
            "is locked with flock (the fcntl module), which this Python does not have",
        )


def prepare_new(run_dir: Path, *, field: str = "--out") -> bool:
    """Make `run_dir` ready for a new run: created 0700, or an existing empty directory; whether it
    was created (`discard_new` undoes this for a run that never started).

    Raises InputError (exit 2, nothing sent) when it cannot be: a file is in the way, it holds
    files (a run: use resume; anything else: never overwritten), or it cannot be created."""
    require_posix()
    existed = run_dir.is_dir()
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError.single(field, "run directory", f"{run_dir} exists and is not a directory")
    if run_dir.is_dir():
        if (run_dir / JOURNAL_NAME).exists():
            RunDirLock(run_dir).ensure_free()  # a live writer: RunDirBusy names its PID
            raise FileExistsError(f"{run_dir} already holds a run; use `swarm-tui resume {run_dir}`")
        try:
            entries = [p for p in run_dir.iterdir() if not _is_leftover(p) and p.name != LOCK_NAME]
        except OSError as exc:
            raise InputError.single(field, "run directory", f"{run_dir} cannot be read: {_os_reason(exc)}") from None
        if entries:
            shown = ", ".join(sorted(p.name for p in entries)[:3]) + (", ..." if len(entries) > 3 else "")
            raise InputError.single(
                field,
                "run directory",
                f"{run_dir} is not empty ({shown}) and holds no run; a new run goes into "
                f"a new or empty directory, so that none of your files is overwritten",
            )
    try:
        run_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        os.chmod(run_dir, PRIVATE_DIR)
        probe = run_dir / temp_name("probe")
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise InputError.single(field, "run directory", f"{run_dir} cannot be written: {_os_reason(exc)}") from None
    return not existed


def discard_new(run_dir: Path, created: bool) -> None:
    """Undo `prepare_new` for a run whose journal was never made (Ctrl-C, a full disk): the lock
    file goes, and the directory too when this process created it and nothing else is in it."""
    with contextlib.suppress(OSError):
        (run_dir / LOCK_NAME).unlink()
    remove_leftovers(run_dir)
    if created:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only when empty


class RunDirLock:
    """The run directory's single-writer lock, held until `release()` or the process's end."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        """Take the lock for this process's life (RunDirBusy, naming the holder, when taken), write
        our PID in it and remove what dead writers left."""
        fd = self._lock()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        remove_leftovers(self.path.parent)
        return self

    def ensure_free(self) -> None:
        """RunDirBusy when a live process writes the directory; otherwise nothing is changed."""
        os.close(self._lock())  # closing drops the flock at once

    def _lock(self) -> int:
        require_posix()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        except OSError as exc:
            raise InputError.single(
                self.path.parent, "run directory", f"cannot take its lock: {_os_reason(exc)}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise InputError.single(
                    self.path.parent, "run directory", f"cannot take its lock: {_os_reason(exc)}"
                ) from None
            raise RunDirBusy.single(
                self.path.parent,
                "run directory",
                f"in use by swarm-tui PID {holder}: one process writes a run at a time; watch or steer it with "
                f"`swarm-tui attach {self.path.parent}`, or resume it once that process has ended",
            ) from None
        return fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def lock_holder(run_dir: Path) -> int | None:
    """The pid written by a live process that holds `run_dir`'s lock (0 when it wrote none); None
    when nobody holds it. Probed with a shared lock taken and dropped at once: it never blocks,
    and a starting writer is kept out for no longer than the probe."""
    if fcntl is None:
        return None
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def remove_leftovers(run_dir: Path) -> list[Path]:
    """Temporary files of processes that died while writing (this process holds the lock, so no
    other live writer can own one)."""
    removed = []
    with contextlib.suppress(OSError):
        for path in run_dir.iterdir():
            match = _LEFTOVER.match(path.name)
            if match is not None and int(match.group(1)) != os.getpid():
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(path)
    return removed


def open_private(path: Path, mode: str = "w"):
    """A text file opened for writing, created 0600 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, mode, encoding="utf-8")


# --------------------------------------------------------------------------- failures in words


def describe_write_failure(exc: BaseException, path: Path) -> str:
    """Why writing `path` failed, in a user's words (disk full, permission, ...)."""
    code = getattr(exc, "errno", None)
    name = getattr(exc, "sqlite_errorname", "") or ""
    if resource is not None and (code in (errno.EFBIG,) or _over_file_size_limit(path)):
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return f"cannot write {path}: the file size limit was reached (ulimit -f: {limit:,} bytes)"
    if code in (errno.ENOSPC, errno.EDQUOT) or name == "SQLITE_FULL":
        return f"cannot write {path}: the disk is full"
    if code in (errno.EACCES, errno.EPERM) or name.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")):
        return f"cannot write {path}: permission denied (or a read-only file system)"
    if code == errno.EROFS:
        return f"cannot write {path}: the file system is read-only"
    if code == errno.ENOENT or name.startswith("SQLITE_CANTOPEN") or not path.exists():
        if path.exists():  # SQLite could not open a file it needs next to it (its -wal, -shm)
            return f"cannot write {path}: it cannot be opened for writing (a read-only file or directory?)"
        return f"cannot write {path}: the run directory was deleted or moved"
    if name.startswith("SQLITE_IOERR") or isinstance(exc, OSError):
        return f"cannot write {path}: disk I/O error ({exc})"
    if isinstance(exc, sqlite3.Error):
        return f"cannot write {path}: {exc}"
    return f"cannot write {path}: {type(exc).__name__}: {exc}"


def _over_file_size_limit(path: Path) -> bool:
    """SQLite reports EFBIG as a plain I/O error: compare the journal's files with `ulimit -f`."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    for candidate in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            if candidate.stat().st_size + 64 * 1024 >= limit:
                return True
    return False


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
