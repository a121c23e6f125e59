"""One job per output at a time: the work folder an output's job keeps its state in, and the lock that holds it.

The work folder is named from the output's whole name (``movie.mp4`` -> ``movie.mp4.work``), so outputs that share
a stem (``movie.mp4``, ``movie.mkv``) never share state. The lock is ``flock`` on a file in the work folder: the
operating system releases it when the process ends in any way (``kill -9`` included), so a rerun after a crash
finds it free, and a second job on the same output while the first runs refuses with one line instead of taking
the first job's files for its own. Importing this module does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from ..media.files import OutputError, os_error

try:
    import fcntl
except ImportError:  # Windows: no flock; jobs there are not guarded against each other
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "job.lock"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a job's work: the message says what was kept, and whether a rerun resumes. A plain
    KeyboardInterrupt means nothing had started (loading, checks)."""


def work_folder(out: Path) -> Path:
    """Where the job writing ``out`` keeps its state: beside it, named from its whole name."""
    out = Path(out)
    return out.with_name(out.name + ".work")


class OutputLock:
    """The exclusive lock of the job writing one output, held from ``acquire`` to ``release`` (or the process's
    end). ``is_ours(work)`` tells a work folder of this program from a user's folder of that name, which is left
    as it is and refused."""

    def __init__(self, out: Path, is_ours: Callable[[Path], bool]) -> None:
        self.out = Path(out)
        self.work = work_folder(self.out)
        self._is_ours = is_ours
        self._fd: Optional[int] = None

    def acquire(self) -> "OutputLock":
        """Take the lock, making the work folder if needed; OutputError (one line) if another job holds it or the
        folder is not this program's."""
        if fcntl is None:
            return self
        for _ in range(10):  # the folder can vanish under us when a finishing job removes it: then try again
            self._check_folder()
            lock = self.work / LOCK_NAME
            try:
                self.work.mkdir(exist_ok=True)
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise os_error(exc, exc.filename or self.work, "write into") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise OutputError(f"another job is writing {self.out} (its work folder {self.work} is locked): "
                                  f"wait for it to end, or choose another --out name") from None
            try:
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return self
            os.close(fd)  # the file we locked was removed meanwhile (a job finishing): lock the new one
        raise OutputError(f"{self.work} keeps being removed and made again: is another program using it?")

    def _check_folder(self) -> None:
        work = self.work
        if not (work.exists() or work.is_symlink()):
            return
        only_lock = work.is_dir() and not work.is_symlink() and {p.name for p in work.iterdir()} <= {LOCK_NAME}
        if not only_lock and not (work.is_dir() and self._is_ours(work)):
            raise OutputError(f"{work} exists and is not a work folder of this program (it has no job.json of "
                              f"one): it is left as it is -- move it, or choose another --out name (nothing was "
                              f"interpolated yet)")

    def release(self) -> None:
        """Let go of the lock; a work folder that holds nothing else (a job refused before its first file) is
        removed with it."""
        if self._fd is None:
            return
        try:
            if {p.name for p in self.work.iterdir()} == {LOCK_NAME}:
                os.remove(self.work / LOCK_NAME)  # under the lock: a job waiting on this file then retries
                self.work.rmdir()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None or fcntl is None
