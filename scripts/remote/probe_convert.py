"""Probe (issue 85): FrameWriter's encode rows (bench_video.encode_stages, veryfast) on the synthetic and the
natural clip at 1080p with OpenCV's own threads left at their default and set to 1, alternated twice, one process.

    python3 -m scripts.remote.probe_convert NATURAL_CLIP [FRAMES]
"""

import os
import sys
import tempfile
from pathlib import Path

import cv2

from bench.bench_video import SYNTHETIC, encode_stages, make_clip
from softsplat_vfi.media.video import read_frames


def main() -> None:
    natural = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    default = cv2.getNumThreads()
    size = tuple(int(x) for x in os.environ.get("HW", "1080x1920").split("x"))  # (HW=144x256: a smoke test here)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for spec in (SYNTHETIC, natural):
            clip = make_clip(spec, folder, size, count)
            frames = list(read_frames(clip.info))
            for _ in range(2):
                for threads in (default, 1):
                    cv2.setNumThreads(threads)
                    rows, _ = encode_stages(clip, frames, 2, ["veryfast"], folder)
                    text = ", ".join(f"{k} {v.value:.1f} ({v.cores or 0:.1f} cores)" for k, v in rows.items()
                                     if "conversion" in k or k.startswith("x264"))
                    print(f"{clip.name} cv2 threads {threads}: {text}", flush=True)
            cv2.setNumThreads(default)


if __name__ == "__main__":
    main()
