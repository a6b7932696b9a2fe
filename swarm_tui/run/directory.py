"""A run directory: who may write it, what it may already hold, and how its files are made.

* **One writer.** A process that runs or resumes a run holds an exclusive `flock` on
  `RUN_DIR/.lock` for its whole life (the OS drops it when the process dies, however it dies,
  so a stale lock is simply taken over). A second `run --out` or `resume` of the same
  directory exits 2 naming the PID that holds it; `attach` takes no lock (it reads the journal
  and steers through its control queue).
* **A new run goes into a new or empty directory**: never over a user's own files; without
  `--out`, a new one named after the time and the job (`default_run_dir`).
* **Private**, and its files made whole or not at all (`util.files`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from datetime import datetime
from pathlib import Path

from swarm_tui.core.errors import InputError
from swarm_tui.journal import JOURNAL_NAME
from swarm_tui.util.files import PRIVATE_DIR, PRIVATE_FILE, is_leftover, remove_leftovers, temp_name

try:  # POSIX only: the package's metadata says so, and a run says so in words (`require_posix`)
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


class RunDirBusy(InputError):
    """Another live process writes this run directory."""


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
            entries = [p for p in run_dir.iterdir() if not is_leftover(p) and p.name != LOCK_NAME]
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


def default_run_dir(job_name: str, root: Path = Path("runs")) -> Path:
    """`--out`'s default: `runs/<timestamp>-<job name>`, numbered when that is taken (nothing is made)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in job_name)[:60] or "job"
    path = root / f"{stamp}-{safe}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{stamp}-{safe}-{n}"
    return path


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


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
