"""The repeated-pattern set: rendered scenes whose middle frame is known exactly, where a flow network can bend,
double or wash out a regular pattern (``python -m bench.patterns`` scores methods on it).

Every scene is a pattern (grid, fence, stripes, text, tiled floor) at a period of 4 to 40 px, thin or thick lines,
bright on dark or dark on bright, either static or moving by a sub-pixel amount, under a large textured occluder
that moves across it (a hand above a cutting mat). Frames are rendered analytically with 4 x 4 supersampling at
times 0, 0.5 and 1 (and -1 and 2 for the video path, ``video``), so the middle frame is exact. Per scene: PSNR
of the middle frame, the detail kept (``evaluation.metrics.detail_kept``), and PSNR over the *far* pixels, those more
than ``FAR`` px from the occluder in all three frames: where the pattern is static there, any error is a bent,
doubled or dotted line.

Real footage is never bit-static, so each static scene also comes filmed as a camera films it (``Scene.camera``):
with sensor noise (``NOISE``), through an H.264 round trip (libx264 at a CRF of ``CRFS``, yuv420p, the frames at
times -1, 0, 1 and 2 as one clip), or with the camera shaking by ``JITTER`` px between frames. The inputs are filmed;
the truth is the scene itself at t = 0.5 (the shaking camera halfway between its positions of the pair), so the
still guard's effect is measured on the frames the guard sees in real footage. Everything is seeded by the scene's
name: the set is the same on every run.

A method is scored through the common call (evaluation/methods.py): ``interpolate`` on the pair, or with ``video``
``interpolate_video`` on 16-bit frames (8 bits would round the exact truth away) through the frames at -1 and 2.

Conventions: H x W x 3 float32 RGB in [0, 1]; positions in pixels, x then y.
"""

from __future__ import annotations

import functools
import math
import subprocess
import zlib
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from evaluation.methods import Benchmark, Method

FAR = 24  # px from the occluder, in every frame, for the far pixels
SAMPLES = 4  # supersampling per axis
FAMILIES = ("grid", "fence", "stripes", "text", "tiles")
PERIODS = (4, 6, 8, 12, 16, 25, 40)
# how a camera films a static scene: "" renders it exactly
CAMERAS = ("noise", "h264", "jitter")
NOISE = 2.0 / 255  # sensor noise: its standard deviation per pixel and channel, independent per frame
CRFS = (18, 23, 28)  # the H.264 round trips' CRFs (libx264, preset medium)
JITTER = (0.1, 0.3)  # px: the camera's move between consecutive frames, its length uniform in this range, any direction
FILMED_TIMES = (-1.0, 0.0, 1.0, 2.0)  # the frames a camera films: the pair and the frames beside it
# whole frames at t = 0.5; otherwise the user's defaults
PATTERNS = Benchmark("patterns", engine=(("tile", 0),), note="exact middle frames, t = 0.5")


@dataclass(frozen=True)
class Scene:
    """One pattern scene: ``family`` at ``period`` px, ``thin`` or thick lines, ``bright`` lines on a dark ground
    (else dark on bright), the pattern moving by ``shift`` px (x, y) over the pair, the occluder by ``occluder``;
    ``camera``: filmed with one of ``CAMERAS`` ("": exact), an H.264 round trip at ``crf``."""

    family: str
    period: float
    thin: bool
    bright: bool
    shift: tuple
    occluder: tuple = (36.0, 10.0)
    size: tuple = (240, 320)  # height, width
    camera: str = ""
    crf: int = 0

    @property
    def static(self) -> bool:
        return self.shift == (0.0, 0.0)

    @property
    def name(self) -> str:
        moving = "static" if self.static else f"moving{self.shift[0]:g}x{self.shift[1]:g}"
        filmed = {"": "", "h264": f"-h264crf{self.crf}"}.get(self.camera, f"-{self.camera}")
        return (f"{self.family}-p{self.period:g}-{'thin' if self.thin else 'thick'}-"
                f"{'bright' if self.bright else 'dark'}-{moving}{filmed}")


def _rng(scene: Scene, what: str) -> np.random.Generator:
    """A generator seeded by the scene's name and ``what`` (the same on every run, unlike ``hash``)."""
    return np.random.default_rng(zlib.crc32(f"{scene.name}/{what}".encode()))


def _step(scene: Scene, frame: int) -> Tuple[float, float]:
    """The shaking camera's move (x, y) from filmed frame ``frame`` to the next, in px."""
    rng = _rng(scene, f"jitter{frame}")
    length, angle = rng.uniform(*JITTER), rng.uniform(0.0, 2.0 * math.pi)
    return length * math.cos(angle), length * math.sin(angle)


def camera_offset(scene: Scene, t: float) -> Tuple[float, float]:
    """Where a jittering camera (``scene.camera == "jitter"``) is at time ``t``, in px from where it was at t = 0:
    a seeded step of ``JITTER`` px between whole times, moving straight between them; (0, 0) for any other scene."""
    if scene.camera != "jitter":
        return 0.0, 0.0
    whole = math.floor(t)
    steps = [_step(scene, k) for k in range(0, whole)] if whole >= 0 else \
        [tuple(-v for v in _step(scene, k)) for k in range(whole, 0)]
    partial = _step(scene, whole)
    x = sum(s[0] for s in steps) + (t - whole) * partial[0]
    y = sum(s[1] for s in steps) + (t - whole) * partial[1]
    return x, y


def _pattern(scene: Scene, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Line coverage in [0, 1] of the pattern at continuous positions (x, y) (already shifted)."""
    p = scene.period
    width = max(1.0, p / 8) if scene.thin else p / 2

    def lines(u: np.ndarray) -> np.ndarray:
        return (np.mod(u, p) < width).astype(np.float32)

    if scene.family == "grid":
        return np.maximum(lines(x), lines(y))
    if scene.family == "fence":
        return np.maximum(lines(x), lines(y / 4))  # pickets, and a rail every four periods
    if scene.family == "stripes":
        return lines(x * 0.8 + y * 0.6)  # diagonal
    if scene.family == "tiles":  # tiles in two tones with grout lines
        tone = (np.mod(np.floor(x / p) + np.floor(y / p), 2) * 0.35).astype(np.float32)
        return np.maximum(lines(x), np.maximum(lines(y), tone))
    if scene.family == "text":  # rows of glyph-like strokes: a bitmap font of 5 x 7 cells per character
        cell = max(p / 6, 1.0)
        cx, cy = np.floor(x / cell), np.floor(y / cell)
        glyph = np.floor(cx / 6) * 7 + np.floor(cy / 9) * 13
        col, row = np.mod(cx, 6), np.mod(cy, 9)
        inside = (col < 5) & (row < 7)
        bits = np.mod(np.floor(glyph * 2654435761 / 2 ** (col * 7 + row) % 1e9), 2) > 0
        return (inside & bits).astype(np.float32)
    raise ValueError(f"unknown pattern family {scene.family!r}: choose one of {', '.join(FAMILIES)}")


def _occluder_texture(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A smooth skin-like texture, in object coordinates."""
    return np.stack([0.75 + 0.1 * np.sin(x / 7) * np.cos(y / 5), 0.55 + 0.08 * np.sin((x + y) / 9),
                     0.45 + 0.06 * np.cos(x / 4 - y / 11)], axis=-1).astype(np.float32)


def occluder_mask(scene: Scene, x: np.ndarray, y: np.ndarray, t: float) -> np.ndarray:
    """Coverage of the occluder (an ellipse with a finger-like bar) at time t, in image coordinates."""
    h, w = scene.size
    ox, oy = w * 0.3 + scene.occluder[0] * t, h * 0.55 + scene.occluder[1] * t
    u, v = x - ox, y - oy
    palm = (u / (w * 0.12)) ** 2 + (v / (h * 0.18)) ** 2 < 1
    finger = (np.abs(v + h * 0.12) < h * 0.035) & (u > 0) & (u < w * 0.25)
    return (palm | finger).astype(np.float32)


# every scene of the set at times -1, 0, 0.5, 1 and 2 (``--video``): a smaller LRU cache, cycled through in order by
# each method, would hit nothing and render every frame again for every method
_CACHED_FRAMES = 5 * 3 * len(FAMILIES) * len(PERIODS)


@functools.lru_cache(maxsize=_CACHED_FRAMES)
def render(scene: Scene, t: float) -> np.ndarray:
    """The scene itself at time ``t`` (0 and 1: the pair), supersampled, where a jittering camera is at ``t``
    (``camera_offset``), without noise or compression: the truth at t = 0.5 (cached: every method scores the same
    frames; treat the array as read-only)."""
    h, w = scene.size
    offsets = (np.arange(SAMPLES) + 0.5) / SAMPLES - 0.5
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    x = (xx[..., None, None] + offsets[None, None, None, :]).astype(np.float32)
    y = (yy[..., None, None] + offsets[None, None, :, None]).astype(np.float32)
    cx, cy = camera_offset(scene, t)  # the camera's shake moves the whole image: the pattern and the occluder
    x, y = np.broadcast_arrays(x - cx, y - cy)
    sx, sy = scene.shift[0] * t, scene.shift[1] * t
    cover = _pattern(scene, x - sx + 3.3, y - sy + 2.7)
    low, high = (0.12, 0.92) if scene.bright else (0.92, 0.12)
    base = np.array([0.25, 0.55, 0.35], np.float32) * 0.6 + 0.2  # a green cutting mat's tint
    ground = low + (high - low) * cover
    colour = ground[..., None] * base / base.mean()
    mask = occluder_mask(scene, x, y, t)[..., None]
    ox, oy = scene.occluder[0] * t, scene.occluder[1] * t
    colour = colour * (1 - mask) + _occluder_texture(x - ox, y - oy) * mask
    return np.clip(colour.mean(axis=(2, 3)), 0, 1).astype(np.float32)


def far_mask(scene: Scene) -> np.ndarray:
    """H x W bool: pixels more than ``FAR`` px from the occluder at times 0, 0.5 and 1."""
    import cv2

    h, w = scene.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    near = np.zeros((h, w), np.uint8)
    for t in (0.0, 0.5, 1.0):
        near |= (occluder_mask(scene, xx, yy, t) > 0).astype(np.uint8)
    distance = cv2.distanceTransform(1 - near, cv2.DIST_L2, 5)
    return distance > FAR


def scenes(quick: bool = False, camera: bool = True) -> List[Scene]:
    """The set: every family at every period, thin and thick lines alternating, bright and dark alternating, static
    and moving by a sub-pixel amount (the exact scenes); with ``camera``, each static scene also as a camera films
    it, the kinds of ``CAMERAS`` in turn (the H.264 round trips at the CRFs of ``CRFS`` in turn). ``quick``: the
    static thin grid at 25 px (the failure users saw), and with ``camera`` that grid filmed each way (CRF 23)."""
    if quick:
        grid = Scene("grid", 25, True, True, (0.0, 0.0), size=(360, 640))
        return [grid] + ([replace(grid, camera=kind, crf=23 if kind == "h264" else 0) for kind in CAMERAS]
                         if camera else [])
    out = []
    for i, family in enumerate(FAMILIES):
        for j, period in enumerate(PERIODS):
            thin, bright = (i + j) % 2 == 0, j % 2 == 0
            out.append(Scene(family, period, thin, bright, (0.0, 0.0)))
            out.append(Scene(family, period, thin, not bright, (2.5, 1.25)))
    if camera:
        static = [s for s in out if s.static]
        out += [replace(s, camera=CAMERAS[i % len(CAMERAS)],
                        crf=CRFS[(i // len(CAMERAS)) % len(CRFS)] if CAMERAS[i % len(CAMERAS)] == "h264" else 0)
                for i, s in enumerate(static)]
    return out


@functools.lru_cache(maxsize=len(FAMILIES) * len(PERIODS))
def _h264(scene: Scene) -> Tuple[np.ndarray, ...]:
    """The frames at ``FILMED_TIMES`` through one libx264 round trip at ``scene.crf`` (8-bit yuv420p, one thread:
    the same bits on every run)."""
    from softsplat_vfi.media.video import ffmpeg_exe

    h, w = scene.size
    if h % 2 or w % 2:
        raise ValueError(f"scene {scene.name}: an H.264 round trip (yuv420p) needs an even size, got {w}x{h}")
    frames = np.stack([np.rint(render(scene, t) * 255).astype(np.uint8) for t in FILMED_TIMES])
    encode = [ffmpeg_exe(), "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
              "-r", "30", "-i", "pipe:0", "-c:v", "libx264", "-preset", "medium", "-crf", str(scene.crf),
              "-pix_fmt", "yuv420p", "-threads", "1", "-f", "h264", "pipe:1"]
    stream = subprocess.run(encode, input=frames.tobytes(), capture_output=True, check=True).stdout
    decode = [ffmpeg_exe(), "-loglevel", "error", "-threads", "1", "-f", "h264", "-i", "pipe:0", "-f", "rawvideo",
              "-pix_fmt", "rgb24", "pipe:1"]
    raw = subprocess.run(decode, input=stream, capture_output=True, check=True).stdout
    decoded = np.frombuffer(raw, np.uint8)
    if decoded.size != frames.size:
        raise ValueError(f"scene {scene.name}: the H.264 round trip gave {decoded.size // (h * w * 3)} frames of "
                         f"{len(FILMED_TIMES)}")
    return tuple((decoded.reshape(frames.shape).astype(np.float32) / 255)[i] for i in range(len(FILMED_TIMES)))


@functools.lru_cache(maxsize=_CACHED_FRAMES)
def filmed(scene: Scene, t: float) -> np.ndarray:
    """The input frame at time ``t`` (one of ``FILMED_TIMES``) as the scene's camera films it (cached; treat the
    array as read-only)."""
    if t not in FILMED_TIMES:
        raise ValueError(f"t {t}: a camera films the frames at {FILMED_TIMES}; render(scene, t) is the scene itself")
    if scene.camera == "noise":
        noise = _rng(scene, f"noise{t:g}").normal(0.0, NOISE, render(scene, t).shape).astype(np.float32)
        return np.clip(render(scene, t) + noise, 0, 1)
    if scene.camera == "h264":
        return _h264(scene)[FILMED_TIMES.index(t)]
    return render(scene, t)


def psnr(out: np.ndarray, truth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
    """PSNR on uint8-rounded frames, over ``mask`` (H x W bool) where given."""
    from evaluation.metrics import to_integer, uint8_psnr

    return uint8_psnr(to_integer(out), to_integer(truth), mask)


def detail(out: np.ndarray, truth: np.ndarray) -> float:
    """The output's mean absolute Laplacian over the truth's (``evaluation.metrics.detail_kept``)."""
    from evaluation.metrics import detail_kept, nchw

    return detail_kept(nchw(out), nchw(truth))


def middle_frame(method: Method, scene: Scene, video: bool = False) -> np.ndarray:
    """The method's middle frame of the scene's filmed pair (``video``: along the video path through the frames at
    times -1 and 2, on 16-bit frames)."""
    from evaluation.metrics import to_float, to_integer

    if not video:
        return method.interpolate(filmed(scene, 0.0), filmed(scene, 1.0), 0.5)
    before, one, two, after = (to_integer(filmed(scene, t), np.uint16) for t in FILMED_TIMES)
    return to_float(method.interpolate_video(one, two, 0.5, before, after))


def score(method: Method, chosen: Sequence[Scene], video: bool = False) -> List[Dict]:
    """Per scene: PSNR, far PSNR and detail of the method's middle frame against the exact one."""
    rows = []
    for scene in chosen:
        truth = render(scene, 0.5)
        out = middle_frame(method, scene, video)
        rows.append({"scene": scene.name, "family": scene.family, "period": scene.period, "static": scene.static,
                     "camera": scene.camera, "psnr": psnr(out, truth), "far_psnr": psnr(out, truth, far_mask(scene)),
                     "detail": detail(out, truth)})
    return rows


def summarise(rows: Sequence[Dict]) -> Dict[str, float]:
    """Means over the exact scenes, and over their static and moving ones (the set before camera variants), then
    over the camera-filmed scenes, all and by kind (``_noise``, ``_h264``, ``_jitter``)."""
    subsets = {"": lambda r: not r["camera"], "_static": lambda r: not r["camera"] and r["static"],
               "_moving": lambda r: not r["camera"] and not r["static"], "_camera": lambda r: bool(r["camera"])}
    subsets.update({f"_{kind}": lambda r, kind=kind: r["camera"] == kind for kind in CAMERAS})
    out: Dict[str, float] = {}
    for label, keep in subsets.items():
        chosen = [r for r in rows if keep(r)]
        for key in ("psnr", "far_psnr", "detail"):
            out[f"{key}{label}"] = float(np.mean([r[key] for r in chosen])) if chosen else float("nan")
    exact = [r["far_psnr"] for r in rows if not r["camera"]]
    out["worst_far_psnr"] = float(min(exact)) if exact else float("nan")
    return out


def guard_effect(on: Dict[str, float], off: Dict[str, float]) -> Dict[str, float]:
    """The still guard's effect on far PSNR (``summarise`` with it on minus off): on the exact static and moving
    scenes and on each kind of camera-filmed static scene."""
    return {label: on[f"far_psnr_{label}"] - off[f"far_psnr_{label}"] for label in ("static", "moving") + CAMERAS}
