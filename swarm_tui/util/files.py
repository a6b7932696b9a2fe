"""Files a run writes that only their owner may read, made whole or not at all.

Prompts and answers are the user's data: directories 0700, files 0600, whatever the umask (a
shared SSH host has other users). A file is written under a temporary name (`temp_name`) and
renamed into place, so a reader never sees half of it; the temporary files a killed process left
behind are removed by the next writer (`remove_leftovers`). `describe_write_failure` says in a
user's words why a write failed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
from pathlib import Path

try:  # POSIX only: rlimits
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
TEMP_SUFFIX = ".tmp"


def temp_name(name: str) -> str:
    """The temporary name `name` is written under by this process (`.NAME.PID.tmp`)."""
    return f".{name}.{os.getpid()}{TEMP_SUFFIX}"


_LEFTOVER = re.compile(r"^\..+\.(\d+)\.tmp(-journal|-wal|-shm)?$")


def is_leftover(path: Path) -> bool:
    return _LEFTOVER.match(path.name) is not None


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
    """A text file (UTF-8; `mode="wb"`: a binary one) opened for writing, created 0600 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")


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
