"""Decoding a damaged video (finding F70): ffmpeg's error lines are read as they come, so many of them cannot stop
the decode (small generated clips; each test well under a second or two)."""

import random
import subprocess
import threading
from pathlib import Path

from softsplat_vfi.media.video import ffmpeg_exe, probe, read_frames
from tests.video_fixtures import make_clip as _clip

PIPE_SIZE = 64 * 1024  # Linux's pipe: an unread stderr holds this much, then ffmpeg blocks writing


def _damaged(clip: Path, out: Path, start: int, step: int, width: int = 8) -> Path:
    """``clip`` with ``width`` bytes of its video data overwritten by noise every ``step`` bytes from ``start``
    (counted from the start of the mdat box), up to its index (moov, which x264's mp4 has last)."""
    data = bytearray(clip.read_bytes())
    rng = random.Random(1)
    first, end = data.find(b"mdat") + 4, data.find(b"moov") - 4
    for pos in range(first + start, end - width, step):
        data[pos:pos + width] = bytes(rng.randrange(256) for _ in range(width))
    out.write_bytes(data)
    return out


def test_a_decode_with_more_errors_than_the_pipe_holds_finishes(tmp_path):
    """ffmpeg logs a line or more per damaged packet, even at -loglevel error; read_frames left its stderr unread,
    so at 64 KiB of them ffmpeg blocked writing the next and the decode hung for ever (this 720-frame clip after
    226 frames: F70). Now the lines are read as they come."""
    bad = _damaged(_clip(tmp_path / "long.mp4", seconds=60, size="64x48"), tmp_path / "bad.mp4", 2000, 40)
    whole = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(bad),
                            "-f", "null", "-"], capture_output=True)
    assert len(whole.stderr) > PIPE_SIZE + 8192  # (what makes it hang: more errors than the pipe holds)
    info = probe(bad)
    got = []
    reader = threading.Thread(target=lambda: got.extend(1 for _ in read_frames(info)), daemon=True)
    reader.start()
    reader.join(timeout=30)  # (a hang fails here instead of stopping the suite)
    assert not reader.is_alive(), f"the decode hung after {len(got)} of {info.frames} frames"
    assert 0 < len(got) < info.frames == 720
