"""Which output frame comes from where: exact rational timestamps, no model, no I/O.

Output frame j is shown at ``j / rate_out`` seconds (for slow motion, at
``j / (factor * rate_in)`` seconds of input time). Between two consecutive anchor
frames A (time ta) and B (time tb) it is A interpolated toward B with
t = (T - ta) / (tb - ta); across a scene cut (``is_cut``) it is the nearer of A and B
instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import List, Optional, Sequence

import numpy as np

from ..media.video import parse_rate  # noqa: F401  (re-exported: the CLI parses --fps here)


@dataclass(frozen=True)
class Plan:
    rate_out: Fraction  # frames per second of the output file
    count: int  # output frames
    step: Fraction  # input-time seconds between output frames

    def time(self, j: int) -> Fraction:
        return j * self.step

    @property
    def slowdown(self) -> int:
        """How many times slower than the input the output plays: 1 for rate conversion, the factor in slow motion."""
        return int(1 / (self.step * self.rate_out))


# the most output frames between two input frames (--factor, or --fps over the input's rate): the frames of a pair
# are listed before it is interpolated, so a factor of a billion filled gigabytes before the first frame
MAX_FACTOR = 1000
# the most output frames of one job: a video job keeps a byte per frame (ten million: two days at 60 frames/s), an
# image job a path per frame, each looked for before any work (a million files in one folder)
MAX_VIDEO_FRAMES = 10_000_000
MAX_IMAGES = 1_000_000


def make_plan(duration: Fraction, rate_in: Fraction, factor: Optional[int] = None,
              fps: Optional[Fraction] = None, slowmo: bool = False, most: Optional[int] = None) -> Plan:
    """Rate conversion keeps the duration (+-1 frame); slow motion keeps the rate and stretches time. ValueError
    naming the flag where a plan makes more than ``MAX_FACTOR`` output frames per input frame, or more than
    ``most`` frames in all (None: no bound, for a stream whose length is not known)."""
    if fps is not None and (factor is not None or slowmo):
        raise ValueError("--fps sets the output rate: use it without --factor and --slowmo")
    if fps is None and factor is None:
        factor = 2
    if factor is not None and factor < 1:
        raise ValueError(f"--factor must be 1 or more, got {factor}")
    if factor is not None and factor > MAX_FACTOR:
        raise ValueError(f"--factor {factor}: at most {MAX_FACTOR} output frames per input frame -- use a --factor "
                         f"of {MAX_FACTOR} or less")
    if slowmo:
        step = 1 / (rate_in * factor)
        plan = Plan(rate_in, int(round(duration / step)), step)
    else:
        rate_out = fps if fps is not None else rate_in * factor
        if fps is not None and fps > MAX_FACTOR * rate_in:
            raise ValueError(f"--fps {fps}: {float(fps / rate_in):.4g} output frames per input frame (at "
                             f"{float(rate_in):.4g} frames/s in), more than {MAX_FACTOR} -- use an --fps of at most "
                             f"{float(MAX_FACTOR * rate_in):.6g}")
        count = int(round(duration * rate_out))
        if count < 1:  # (found at the end before, as ffmpeg's error joining no segments)
            raise ValueError(f"--fps {rate_out}: the input lasts {float(duration):.3g} s, which holds no frame at "
                             f"{float(rate_out):.4g} frames/s -- use an --fps of at least {float(1 / duration):.3g}")
        plan = Plan(rate_out, count, 1 / rate_out)
    if most is not None and plan.count > most:
        flag = f"--fps {fps}" if fps is not None else f"--factor {factor}"
        raise ValueError(f"{flag}: the output would hold {plan.count} frames, more than the {most} one job makes "
                         f"-- use a smaller {flag.split()[0]}, or split the input into parts")
    return plan


@dataclass
class Source:
    """What output frame j is: a copy of an anchor, or an interpolation between two."""

    kind: str  # "copy" or "interpolate"
    t: float = 0.0
    take_second: bool = False  # for copies: the later anchor (B) rather than A


def source_between(time: Fraction, ta: Fraction, tb: Fraction, cut: bool, eps: Fraction = Fraction(1, 10**6)) -> Source:
    """Output at ``time`` with ta <= time < tb."""
    t = (time - ta) / (tb - ta)
    if t <= eps:
        return Source("copy")
    if cut:
        return Source("copy", take_second=t >= Fraction(1, 2))
    if t >= 1 - eps:
        return Source("copy", take_second=True)
    return Source("interpolate", float(t))


def thumb_change(a_thumb: np.ndarray, b_thumb: np.ndarray) -> float:
    """Mean absolute difference of two small grey thumbnails (values in [0, 1])."""
    return float(np.abs(a_thumb - b_thumb).mean())


# a jump within one scene (a clip that loops back, a cut between two shots of one place) changes the picture less
# than ``threshold`` but far more than the motion around it: this many times the changes before and after, ...
SPIKE_RATIO = 3.0
# ... and at least this share of ``threshold`` (below it, too small a change to mislead the flow)
SPIKE_FLOOR = 1 / 3


def is_cut(before: Sequence[float], change: float, after: Optional[float], threshold: float) -> bool:
    """Whether two consecutive anchors whose thumbnails differ by ``change`` (``thumb_change``) lie across a cut:
    ``change`` above ``threshold``, or a spike: above ``SPIKE_FLOOR * threshold`` and ``SPIKE_RATIO`` times the
    change around it (the larger of the median of ``before``, the changes between the anchors just before, and
    ``after``, the change to the next anchor; None at the end). ``threshold`` <= 0 finds none."""
    if threshold <= 0:
        return False
    if change > threshold:
        return True
    around = ([float(np.median(before))] if len(before) else []) + ([after] if after is not None else [])
    return bool(around) and change > SPIKE_FLOOR * threshold and change > SPIKE_RATIO * max(around)


def thumbnail(frame: np.ndarray) -> np.ndarray:
    """64-wide grey thumbnail in [0, 1] of an H x W x 3 uint8/uint16 frame (of its colour, if it also has alpha)."""
    import cv2

    scale = 65535.0 if frame.dtype == np.uint16 else 255.0
    h, w = frame.shape[:2]
    small = cv2.resize(frame, (64, max(1, round(64 * h / w))), interpolation=cv2.INTER_AREA).astype(np.float32)
    return small[:, :, :3].mean(axis=2) / scale


def planned_sources(anchors: List[Fraction], cuts: List[bool], plan: Plan) -> List[tuple]:
    """The whole schedule at once (for tests and dry runs): (j, anchor index, Source) per output frame."""
    out = []
    a = 0
    for j in range(plan.count):
        time = plan.time(j)
        while a + 1 < len(anchors) and anchors[a + 1] <= time:
            a += 1
        if a + 1 < len(anchors):
            out.append((j, a, source_between(time, anchors[a], anchors[a + 1], cuts[a])))
        else:
            out.append((j, a, Source("copy")))
    return out
