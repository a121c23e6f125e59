"""Helpers shared by the video job tests (test_robustness, test_jobs, test_overlap, test_pipe): a small generated clip,
a stand-in for the network and a writer without its thread."""

import subprocess
import time
from pathlib import Path

import numpy as np

from softsplat_vfi.media.video import ffmpeg_exe


def make_clip(path: Path, seconds=2, rate=12, size="96x64", audio=False) -> Path:
    """An x264 clip of ffmpeg's testsrc2 pattern (with a sine tone where ``audio``)."""
    args = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
            f"testsrc2=size={size}:rate={rate}"]
    if audio:
        args += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-c:a", "aac", "-shortest"]
    subprocess.run(args + ["-t", str(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


class Blend:
    """Stands in for the network: mixes the two frames, counts its calls, can wait or fail on a given call."""

    def __init__(self, wait=0.0, fail_at=None, on_call=None):
        self.calls, self.wait, self.fail_at, self.on_call = 0, wait, fail_at, on_call

    def __call__(self, one, two, times):
        self.calls += 1
        if self.on_call is not None:
            self.on_call(self.calls)
        if self.calls == self.fail_at:
            raise KeyboardInterrupt
        time.sleep(self.wait)
        return [(1 - t) * one.astype(np.float32) + t * two.astype(np.float32) for t in times]


class InlineWriter:
    """pipeline.prefetch.WriteBehind without its thread: each item consumed as it is put, as before the writing
    moved behind the network (issue 64, and the pipes in session 58)."""

    def __init__(self, consume, depth=4, name=""):
        self.consume = consume

    def put(self, item):
        self.consume(item)

    def check(self):
        pass

    def drain(self):
        pass

    def finish(self):
        pass

    def stop(self):
        pass
