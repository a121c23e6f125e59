"""Jobs side by side and one after another (issue 67): a lock per output, a key per output that covers every
option that changes the frames, and reruns that never mix two settings. CPU, small generated clips; the network is
a stand-in (``Blend``) where it is not the point."""

import pytest

from engine import Interpolator, InterpolatorOptions
from media.video import probe
from pipeline.video import VideoOptions, interpolate_video
from test_robustness import Blend, _clip


def _interrupted(clip, out, options, weights_id, calls=5):
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(clip, out, Blend(fail_at=calls), options, weights_id=weights_id, progress=False)


def test_resuming_with_another_tile_starts_over(tmp_path, cpu_network):
    """The resume key listed options by hand and left out ``tile``: a resumed video could mix tiled and
    whole-frame segments."""
    whole = Interpolator(InterpolatorOptions(device="cpu", tile=0), network=cpu_network)
    tiled = Interpolator(InterpolatorOptions(device="cpu", tile=32), network=cpu_network)
    assert whole.job_id != tiled.job_id and "tile=32" in tiled.job_id
    clip = _clip(tmp_path / "in.mp4", seconds=2)
    out = tmp_path / "out.mp4"
    options = VideoOptions(segment_seconds=0.5)  # 12 output frames a segment
    _interrupted(clip, out, options, whole.job_id, calls=15)
    stats = interpolate_video(clip, out, Blend(), options, weights_id=tiled.job_id, progress=False)
    assert stats["resumed_segments"] == 0 and probe(out).frames == 48
    # the same settings do resume
    _interrupted(clip, out, options, whole.job_id, calls=15)
    stats = interpolate_video(clip, out, Blend(), options, weights_id=whole.job_id, progress=False)
    assert stats["resumed_segments"] >= 2
