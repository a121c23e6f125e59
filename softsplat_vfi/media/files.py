"""Output files that never cost the user a file: atomic writes, checks before the work, one-line errors.

Conventions:
  - Nothing the run did not create is overwritten or deleted; an existing output the user named (``--out``) is
    replaced only where this program made it (``mark_made``, ``made_here``) or the user says so (``--overwrite``),
    and never where it is one of the inputs (``check_not_input``).
  - A file appears under its final name only when complete: it is written under a temporary name in the same
    folder and renamed. Created with mode 0o666, so the user's umask decides its permissions, as for any file
    (``tempfile.mkstemp`` would give 0600, which the rename keeps).
  - Every failure to create, write, rename or remove a file becomes an ``OutputError`` (a ValueError: the CLI
    prints it as one line and exits 2) naming the path, the cause read from the errno, and what to do for that
    cause only.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple, Union

from .errors import FieldError, Said


class OutputError(FieldError):
    """A file could not be written (or would cost the user a file); the message names the path, cause and fix
    (and the option to change by its field name: ``out``, ``overwrite``; ``media.errors``)."""


# errno -> (the cause in plain words, what to do)
_CAUSES = {
    errno.ENOSPC: ("no space left on the disk", "free some space there or choose {out} on another disk"),
    errno.EDQUOT: ("your disk quota is used up", "free some of your space there or choose {out} on another disk"),
    errno.EROFS: ("the file system is read-only", "choose {out} in a folder on a writable disk"),
    errno.EACCES: ("permission denied", "choose {out} in a folder you may write to, or change the folder's "
                                        "permissions"),
    errno.EPERM: ("the operation is not permitted there", "choose {out} in a folder you may write to"),
    errno.ENOENT: ("its folder no longer exists (removed during the run?)", "create the folder again"),
    errno.ENOTDIR: ("a part of the path is not a folder", "choose {out} in an existing folder"),
    errno.EISDIR: ("a folder has that name", "choose another {out} name"),
    errno.ENAMETOOLONG: ("the name is too long", "choose a shorter {out} name"),
    errno.EIO: ("input/output error (a failing disk, or a drive or network share that went away)",
                "check the disk and its connection"),
    errno.EFBIG: ("the file is larger than this file system allows", "choose {out} on another disk"),
}


def os_error(exc: OSError, path: Union[str, Path], action: str = "write", resume: str = "") -> OutputError:
    """The one-line OutputError for an OSError met while doing ``action`` to ``path``; ``resume`` (e.g. "rerun
    the same command to resume") is added where finished work is kept."""
    cause, fix = _CAUSES.get(exc.errno, (exc.strerror or str(exc), "check the folder and try again"))
    return OutputError(Said("cannot {action} {path}: {cause} -- " + fix + "{resume}", action=action, path=path,
                            cause=cause, resume=f"; {resume}" if resume else ""))


def errno_in(text: str) -> Optional[int]:
    """The errno of the first operating-system error a program's message names (ffmpeg prints e.g. "Could not
    write header ...: No space left on device"), or None."""
    found = [(text.find(os.strerror(code)), code) for code in _CAUSES if os.strerror(code) in text]
    return min(found)[1] if found else None


def ffmpeg_os_error(text: str, path: Union[str, Path], action: str = "write",
                    resume: str = "") -> Optional[OutputError]:
    """The OutputError for ffmpeg's error ``text`` if it names an operating-system cause, else None."""
    code = errno_in(text)
    return None if code is None else os_error(OSError(code, os.strerror(code)), path, action, resume)


def human_size(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def temporary_name(path: Path) -> Path:
    """A name beside ``path`` that no file has (hidden, random): where ``path`` is written before the rename."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


def _create(path: Path) -> int:
    """Open a new file for writing; O_EXCL: never an existing one, mode 0o666: the umask decides."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)


def atomic_write(path: Union[str, Path], data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name in the same folder, then rename it; on any failure
    nothing is left under either name and an OutputError says why."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        fd = _create(tmp)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        remove_quietly(tmp)
        raise os_error(exc, path) from None


# the extended attribute that marks a file as made by this program (Linux; where a file system keeps no user
# attributes, or elsewhere, nothing is marked, and an existing output is replaced only with --overwrite)
_MADE_MARK = "user.softsplat.made_by"


def mark_made(path: Path, what: str) -> None:
    """Record on the finished file ``path`` that ``what`` made it, with its size and modification time, so that a
    rerun may replace it (``made_here``) while a file of that name that anyone changed since, or made, is kept.
    Nothing where the file system keeps no extended attributes."""
    setxattr = getattr(os, "setxattr", None)
    try:
        st = os.stat(path)
        if setxattr is not None:
            record = {"made_by": what, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
            setxattr(path, _MADE_MARK, json.dumps(record).encode())
    except OSError:
        pass


def made_here(path: Path, what: str) -> bool:
    """Whether the existing file ``path`` is one ``what`` made (``mark_made``) and nobody changed since."""
    getxattr = getattr(os, "getxattr", None)
    if getxattr is None:
        return False
    try:
        record = json.loads(getxattr(path, _MADE_MARK))
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record == {"made_by": what, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def check_replaceable(out: Path, overwrite: bool, what: str) -> None:
    """OutputError if ``out`` is an existing file that ``what`` did not make (``made_here``), unless ``overwrite``:
    a user's file is kept, and the job refused before any work."""
    out = Path(out)
    if not overwrite and (out.exists() or out.is_symlink()) and not made_here(out, what):
        raise OutputError(Said("{path} exists, and this program did not write it: it is kept -- choose another "
                               "{out} name, or add {overwrite:=True} to replace it (nothing was interpolated yet)",
                               path=out))


def remove_quietly(path: Path) -> None:
    """Remove a file this run made, if it is there; a failure to remove it leaves it (it is hidden or in our
    work folder), never an error on top of the one being reported."""
    try:
        os.remove(path)
    except OSError:
        pass


def check_folder(folder: Union[str, Path], need: int = 0, field: str = "out") -> None:
    """Before any work: ``folder`` exists, takes a new file, and has ``need`` bytes free (an estimate of what the
    job writes). OutputError otherwise, naming the cause found (and ``field``, the option that named the folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise OutputError(Said("{" + field + "}: folder '{folder}' does not exist (create it first)", folder=folder))
    probe = temporary_name(folder / "write-check")
    try:
        os.close(_create(probe))
        os.remove(probe)
    except OSError as exc:
        remove_quietly(probe)
        raise os_error(exc, folder, "write into") from None
    if need > 0:
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            return  # the space cannot be asked for here (some network shares): the writes will tell
        if free < need:
            raise OutputError(Said("not enough space in {folder}: the job writes about {need}, {free} is free -- "
                                   "free some space there or choose {out} on another disk (nothing was "
                                   "interpolated yet)", folder=folder, need=human_size(need), free=human_size(free)))


def same_file(a: Union[str, Path], b: Union[str, Path]) -> bool:
    """Whether paths ``a`` and ``b`` name one file (also through links, or another spelling of the name)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def _file_id(path: Path) -> Optional[Tuple[int, int]]:
    """The (device, inode) of an existing file (through links), None where it cannot be asked for."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def check_not_input(outputs: Iterable, inputs: Iterable, field: str = "out") -> None:
    """OutputError if any of ``outputs`` is one of ``inputs`` (``same_file``): an input is never overwritten.
    The inputs are indexed once, so a folder of frames costs one look-up per output, not one per pair."""
    inputs = [Path(p) for p in inputs]
    by_id: Dict[Tuple[int, int], int] = {}  # the first input of each existing file
    by_name: Dict[Path, int] = {}  # the first input of each resolved name
    for i, source in enumerate(inputs):
        file_id = _file_id(source)
        if file_id is not None:
            by_id.setdefault(file_id, i)
        by_name.setdefault(source.resolve(), i)
    for out in outputs:
        out = Path(out)
        file_id = _file_id(out)
        # an existing output is an input if it is the same file; any output if its name resolves to an input's
        # (for two existing files the names resolve alike only where they are one file)
        hits = [i for i in (by_id.get(file_id), by_name.get(out.resolve())) if i is not None]
        if hits:
            raise OutputError(Said("{" + field + "} {path} is the input {source}: the input is never overwritten "
                                   "-- choose another output name", path=out, source=inputs[min(hits)]))
