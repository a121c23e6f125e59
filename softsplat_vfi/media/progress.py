"""Progress on stderr that says only what it knows.

On a terminal: a tqdm bar (``Progress``) or a spinner with the time spent (``Spinner``), redrawn in place. In a
log (stderr not a terminal) nothing is redrawn: a plain line now and then, never ``\\r``-joined updates. Rates
and times left count only the work done in this run after its first step: steps skipped because an earlier run
made them (a resumed job) move the count but not the rate, and the first step, which carries the start-up (CUDA
graph capture; ``--compile``'s compiling, about a minute at 1080p), is counted but not timed, so nothing is
estimated before the second.
Importing this module does nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Optional, Set, Tuple

# a line in a log at most this often (seconds)
LOG_EVERY = 30.0
# the bars (tqdm's) and spinners drawn on a terminal now: a line said meanwhile goes above them (``say_line``)
_BARS: Set["Progress"] = set()
_SPINNERS: Set["Spinner"] = set()
_SPINNING = threading.Lock()  # a spinner's redraw against a line said


def say_line(text: str, stream: Optional[IO[str]] = None) -> None:
    """``text`` on a line of its own on ``stream`` (stderr), above a bar or spinner drawn there, which is drawn
    again below it: a note said while a bar was drawn (a damaged input's, found while decoding) landed mid-line,
    after the bar."""
    stream = stream if stream is not None else sys.stderr
    if any(bar.stream is stream for bar in list(_BARS)):
        from tqdm import tqdm

        tqdm.write(text, file=stream)  # (clears tqdm's bars on the stream, writes, draws them again)
        return
    with _SPINNING:
        spinners = [spinner for spinner in _SPINNERS if spinner.stream is stream]
        for spinner in spinners:
            stream.write("\r" + " " * spinner.width + "\r")
        print(text, file=stream, flush=True)
        for spinner in spinners:
            spinner.draw()


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """``total`` steps (frames; None: not known, as in a stream), some of which may be skipped (``skip``) rather than
    done (``update``)."""

    def __init__(self, total: Optional[int], desc: str = "", unit: str = "frame", disable: bool = False,
                 stream: Optional[IO[str]] = None, every: float = LOG_EVERY) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.stream = stream if stream is not None else sys.stderr
        self.disable = disable
        self.done = self.skipped = 0
        self.start = time.monotonic()
        # (time, steps done) at the end of this run's first update: rates count from there
        self._first: Optional[Tuple[float, int]] = None
        self._next_line = self.start + every
        self._bar = None
        if not disable and is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc or None, file=self.stream)
            _BARS.add(self)

    def skip(self, count: int = 1) -> None:
        """Steps an earlier run made: counted, not timed."""
        self.skipped += count
        if self._bar is not None:
            # (tqdm's rates: the average counts from ``initial``, the moving one from ``last_print_n``)
            self._bar.initial += count
            self._bar.n += count
            self._bar.last_print_n += count
            self._bar.refresh()

    def update(self, count: int = 1) -> None:
        """Steps made by this run."""
        self.done += count
        if self._first is None:
            self._first = (time.monotonic(), self.done)
        if self._bar is not None:
            self._bar.update(count)
        elif not self.disable and time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + self.every
            print(self.line(), file=self.stream, flush=True)

    def line(self) -> str:
        """The state in words: counts, and the rate and time left of this run's work where it has any."""
        count = self.done + self.skipped
        of_total = "" if self.total is None else f"/{self.total}"
        text = f"{self.desc + ': ' if self.desc else ''}{count}{of_total} {self.unit}s"
        if self.skipped:
            text += f" ({self.skipped} from an earlier run)"
        if self._first is None:
            return text
        since, before = self._first
        timed, elapsed = self.done - before, time.monotonic() - since
        if timed and elapsed > 0:
            rate = timed / elapsed
            text += f", {rate:.2f} {self.unit}s/s" if rate >= 1 else f", {1 / rate:.1f} s/{self.unit}"
            if self.total is not None:
                text += f", about {_clock((self.total - count) / rate)} left"
        return text

    def close(self) -> None:
        if self._bar is not None:
            _BARS.discard(self)
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Spinner:
    """Work of unknown length (one long pair): on a terminal a spinner with the time spent, redrawn twice a second;
    in a log one line at the start and one every ``every`` seconds."""

    FRAMES = "|/-\\"

    def __init__(self, desc: str, stream: Optional[IO[str]] = None, every: float = LOG_EVERY,
                 disable: bool = False) -> None:
        self.desc, self.every, self.disable = desc, every, disable
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._turn = 0
        self.width = 0  # of the spinner's line as last drawn

    def __enter__(self) -> "Spinner":
        if self.disable:
            return self
        self.start = time.monotonic()
        terminal = is_terminal(self.stream)
        if not terminal:
            print(f"{self.desc} ...", file=self.stream, flush=True)
        self._thread = threading.Thread(target=self._run, args=(terminal,), name="spinner", daemon=True)
        self._thread.start()
        return self

    def draw(self) -> None:
        """The spinner's line, drawn over itself (on a terminal)."""
        line = f"{self.desc} {self.FRAMES[self._turn % 4]} {_clock(time.monotonic() - self.start)}"
        self.width = len(line)
        self.stream.write("\r" + line)
        self.stream.flush()

    def _run(self, terminal: bool) -> None:
        if terminal:
            with _SPINNING:
                _SPINNERS.add(self)
        while not self._stop.wait(0.5 if terminal else self.every):
            if terminal:
                with _SPINNING:
                    self._turn += 1
                    self.draw()
            else:
                elapsed = time.monotonic() - self.start
                print(f"{self.desc}: still working, {_clock(elapsed)} so far", file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        with _SPINNING:
            _SPINNERS.discard(self)
        if is_terminal(self.stream):
            self.stream.write(f"\r{self.desc}: {_clock(time.monotonic() - self.start)}\n")
            self.stream.flush()
