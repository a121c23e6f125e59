"""Training data, kept on the GPU: real footage triplets and synthetic layered motion.

Footage: every clip of ``clips.jsonl`` is decoded once (OpenCV) into a uint8 tensor
on the device. A sample is a triplet (i - k1, i, i + k2) with t = k1 / (k1 + k2),
never spanning a scene cut or a repeated frame, with gaps widened for slow clips.

Synthetic: textured layers cut from real frames move with their own affine motion
over a moving background; frames are rendered at 0, t and 1, and the ground-truth
flows one->two and two->one come with them (occlusion handled by the layer order).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from training.listing import clip_entries, listing_path


@dataclass
class Clip:
    name: str
    frames: torch.Tensor  # T x 3 x H x W uint8, RGB (on the device, or memory-mapped on the CPU: frame_cache)
    motion: float  # mean flow, pixels per stored frame
    cuts: Tuple[int, ...]  # a cut lies between frame c-1 and c
    repeated: torch.Tensor  # T-1 bools on the CPU: frame j+1 (nearly) equals frame j
    group: str = ""  # the footage folder's name (e.g. footage, footage2): validation reports per folder
    source: str = ""  # the source repository (owner/name): held-out sets share none with training


def _decode(path: Path) -> torch.Tensor:
    import cv2

    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(torch.from_numpy(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)))
    cap.release()
    if not frames:
        raise ValueError(f"no frames decoded from {path}")
    return torch.stack(frames).permute(0, 3, 1, 2).contiguous()


def clean_span(clip: Clip, start: int, end: int) -> bool:
    """Whether stored frames ``start`` to ``end`` of ``clip`` exist and show one continuous shot: no cut after
    ``start`` up to ``end`` and no repeated frame among them."""
    if start < 0 or end >= clip.frames.shape[0]:
        return False
    if any(start < c <= end for c in clip.cuts):
        return False
    return not bool(clip.repeated[start:end].any())


def source_repository(entry: dict) -> str:
    """The repository a clip was cut from ("owner/name"), without the commit."""
    return str(entry.get("source", "")).split("@")[0].strip()


def clip_motion(entry: dict) -> float:
    """Mean flow in pixels per stored frame at the stored size. ``footage`` records it per source frame at the
    source size (``flow_mean_px_per_orig_frame``), ``footage2`` per stored frame at the stored size
    (``flow_mean_px``)."""
    if "flow_mean_px" in entry:
        return float(entry["flow_mean_px"])
    orig_w = int(str(entry.get("orig_size", "")).split("x")[0] or entry["width"])
    size_scale = entry["width"] / orig_w if orig_w else 1.0
    return float(entry["flow_mean_px_per_orig_frame"]) * entry["frame_step"] * size_scale


RootsArg = Union[Path, Sequence[Path]]


def _roots(root: RootsArg) -> List[Path]:
    return [Path(root)] if isinstance(root, (str, Path)) else [Path(r) for r in root]


def repeated_frames(frames: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """T-1 bools: frame j+1 (nearly) equals frame j (mean absolute difference under 0.5 of 255), in chunks so a
    long clip never needs a float copy of itself."""
    flags = []
    for i in range(0, max(frames.shape[0] - 1, 0), chunk):
        part = frames[i:i + chunk + 1].float()
        flags.append(((part[1:] - part[:-1]).abs().mean(dim=(1, 2, 3)) < 0.5).cpu())
    return torch.cat(flags) if flags else torch.zeros(0, dtype=torch.bool)


def cached_frames(root: Path, entry: dict, cache: Path) -> Tuple[torch.Tensor, torch.Tensor]:
    """A clip's frames memory-mapped from ``cache`` (decoded and written there on first use) and its repeated-frame
    flags. Several training processes on one machine then share one copy of the footage in the page cache instead
    of each holding its own on the GPU."""
    import warnings

    base = cache / root.name / entry["file"]
    frames_path, flags_path = base.with_suffix(".npy"), base.with_suffix(".repeated.npy")
    if not (frames_path.is_file() and flags_path.is_file()):
        frames = _decode(root / entry["file"])
        base.parent.mkdir(parents=True, exist_ok=True)
        for path, array in ((frames_path, frames.numpy()), (flags_path, repeated_frames(frames).numpy())):
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                np.save(f, array)
            tmp.replace(path)
    with warnings.catch_warnings():  # read-only memory map: the tensor is never written
        warnings.simplefilter("ignore", UserWarning)
        frames = torch.from_numpy(np.load(frames_path, mmap_mode="r"))
    return frames, torch.from_numpy(np.load(flags_path))


def footage_entries(root: RootsArg) -> List[Tuple[Path, dict]]:
    """(folder, entry) for every clip of every footage folder's clips.jsonl; clip files must be unique."""
    pairs = [(r, e) for r in _roots(root) for e in clip_entries(r)]
    names = [e["file"] for _, e in pairs]
    if len(set(names)) != len(names):
        raise ValueError("two footage folders list the same clip file: pass each folder once")
    return pairs


def missing_clips(root: RootsArg) -> List[str]:
    """The clip files that clips.jsonl lists but the folder lacks (a footage folder staged in part)."""
    return [str(r / e["file"]) for r, e in footage_entries(root) if not (r / e["file"]).is_file()]


def load_clips(root: RootsArg, names: Optional[Sequence[str]], device: torch.device, min_size: int,
               exclude: Sequence[str] = (), limit: Optional[int] = None, cache: Optional[Path] = None,
               keep: Optional[Callable[[Path, dict], bool]] = None) -> List[Clip]:
    """Decode the listed clips (all of the folders' clips.jsonl if ``names`` is None) onto ``device``, or, with
    ``cache``, memory-map them from decoded copies there (on the CPU; samplers move crops to their device).
    ``root``: one footage folder or several. ``keep``: a predicate on (folder, entry) that a clip must pass."""
    pairs = footage_entries(root)
    if names is not None:
        wanted = set(names)
        missing = wanted - {e["file"] for _, e in pairs}
        if missing:
            raise ValueError(f"clips not in {', '.join(str(listing_path(r)) for r in _roots(root))}: "
                             f"{sorted(missing)}")
        pairs = [(r, e) for r, e in pairs if e["file"] in wanted]
    excluded = set(exclude)
    pairs = [(r, e) for r, e in pairs if e["file"] not in excluded and (keep is None or keep(r, e))
             and min(e["width"], e["height"]) >= min_size and e["frames"] >= 3][:limit]

    def read(pair: Tuple[Path, dict]) -> Tuple[torch.Tensor, torch.Tensor]:
        r, e = pair
        if cache is not None:
            return cached_frames(r, e, cache)
        frames = _decode(r / e["file"]).to(device)
        return frames, repeated_frames(frames)

    with ThreadPoolExecutor(max_workers=8) as pool:
        decoded = list(pool.map(read, pairs))
    return [Clip(e["file"], frames, clip_motion(e), tuple(e["cuts_before_frame"]), repeated, r.name,
                 source_repository(e))
            for (r, e), (frames, repeated) in zip(pairs, decoded)]


def to_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a small CPU tensor to ``device`` without making the host wait for the GPU.

    A plain ``.to("cuda")`` from pageable memory synchronises the stream; sampling
    does dozens of such copies per batch, which would stall the training loop.
    """
    if device.type != "cuda" or x.device.type != "cpu":
        return x.to(device)
    return x.pin_memory().to(device, non_blocking=True)


def require_clips(clips: Sequence[Clip]) -> None:
    """ValueError where loading left no clips (every clip smaller than the crop, or a wrong folder)."""
    if not clips:
        raise ValueError("no clips to sample from: check --data and the crop size")


# the mean motion (px) a slow clip's widest frame gap aims at (--target-motion 12 was tried and removed:
# docs/findings.md, F60)
TARGET_MOTION_PX = 6.0


def gap_limits(clips: Sequence[Clip], max_gap: int) -> List[int]:
    """The largest frame gap k of each clip's triplets: widened for slow clips (k x the clip's motion about
    ``TARGET_MOTION_PX``, k at most ``max_gap``), so every clip contributes motion."""
    return [max(1, min(max_gap, round(TARGET_MOTION_PX / max(c.motion, 0.25)))) for c in clips]


def shard_ranks(clips: Sequence[Clip], world: int) -> List[int]:
    """The process (rank) of ``world`` whose shard of the training footage holds each clip.

    Longest clips first (ties by footage folder and name, so the order the clips were loaded in plays no part),
    each to the rank with the fewest frames so far (ties: the lowest rank). Every clip lies in exactly one shard,
    every rank gets one clip at least, and the shards' frame counts differ by at most the longest clip's.
    Raises ValueError where there are fewer clips than processes."""
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")
    if len(clips) < world:
        raise ValueError(f"{len(clips)} training clips cannot be shared among {world} processes (each takes one "
                         f"clip at least): run on fewer processes")
    frames, ranks = [0] * world, [0] * len(clips)
    for i in sorted(range(len(clips)), key=lambda i: (-clips[i].frames.shape[0], clips[i].group, clips[i].name)):
        rank = min(range(world), key=lambda r: (frames[r], r))
        ranks[i] = rank
        frames[rank] += clips[i].frames.shape[0]
    return ranks


def shard(clips: Sequence[Clip], world: int, rank: int) -> List[Clip]:
    """The clips of ``rank``'s shard (``shard_ranks``), in the order they were given: with one process all of them
    as given, so that a one-process run draws exactly the batches it drew before runs were sharded."""
    return [clip for clip, r in zip(clips, shard_ranks(clips, world)) if r == rank]


class FootageSampler:
    """Draws augmented triplet batches from decoded clips."""

    def __init__(self, clips: List[Clip], crop: int, max_gap: int = 4,
                 generator: Optional[torch.Generator] = None, native_share: float = 0.0,
                 downscale_share: float = 0.0, device: Optional[torch.device] = None,
                 neighbours: bool = False, quadratic_share: float = 1.0) -> None:
        """``native_share``: fraction of triplets taken as consecutive stored frames (k1 = k2 = 1) from
        clips drawn by length alone, i.e. the small motions of ordinary x2 interpolation.
        ``downscale_share``: fraction of crops cut 1-2x larger (log-uniform, as the frame allows) and
        shrunk to ``crop`` with antialiasing: finer detail per pixel, less coding noise, less motion.
        ``neighbours``: batches also hold each triplet's outer neighbours (``before``, ``after``: the frames as far
        before one and after two as one is from two, for quadratic motion) and ``quad``, 1 where the shot has
        them, 0 where it does not (``before`` and ``after`` are then copies of ``one`` and ``two``); the
        triplets drawn do not change. ``quadratic_share``: with ``neighbours``, the fraction of triplets that keep
        them where the shot has them (the others get 0, constant velocity, as image pairs and clip ends run).
        Every clip must be at least ``crop`` on its short side."""
        require_clips(clips)
        for name, share in (("native_share", native_share), ("downscale_share", downscale_share),
                            ("quadratic_share", quadratic_share)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {share}")
        small = [c.name for c in clips if min(c.frames.shape[2:]) < crop]
        if small:
            raise ValueError(f"{len(small)} clips (the first: {small[0]}) are smaller than the {crop}-px crop on "
                             f"their short side: leave them out or lower the crop")
        self.downscale_share = downscale_share
        self.clips = clips
        # where batches are made: the frames' device, or the GPU when the frames are memory-mapped on the CPU
        self.device = device if device is not None else clips[0].frames.device
        self.crop = crop
        self.gen = generator
        self.native_share = native_share
        self.neighbours = neighbours
        self.quadratic_share = quadratic_share
        self.lengths = torch.tensor([float(c.frames.shape[0]) for c in clips], dtype=torch.float64)
        self.max_k = gap_limits(clips, max_gap)
        weights = [c.frames.shape[0] * math.sqrt(min(max(c.motion * k, 1.0), 16.0))
                   for c, k in zip(clips, self.max_k)]
        self.weights = torch.tensor(weights, dtype=torch.float64)
        self.nonlinearity: Optional[List[torch.Tensor]] = None  # set by limit_nonlinearity
        self.max_nonlinearity = 0.0

    def limit_nonlinearity(self, tables: List[torch.Tensor], max_px: float) -> None:
        """Leave out footage triplets whose non-linearity (``training.linearity``: how far, in pixels, constant
        velocity misplaces the middle frame) exceeds ``max_px``. ``tables``: one ``clip_nonlinearity`` table per
        clip, [start, k1 - 1, k2 - 1], covering the clip's k range (``self.max_k``)."""
        if not max_px > 0:
            raise ValueError(f"max_px must be positive, got {max_px}")
        if len(tables) != len(self.clips):
            raise ValueError(f"{len(tables)} non-linearity tables for {len(self.clips)} clips")
        for clip, table, k in zip(self.clips, tables, self.max_k):
            if table.shape[0] != clip.frames.shape[0] or min(table.shape[1:]) < k:
                raise ValueError(f"the non-linearity table of {clip.name} is {tuple(table.shape)}, the clip needs "
                                 f"({clip.frames.shape[0]}, {k}, {k}): measure it again (training.linearity)")
        self.nonlinearity = [t[:, :k, :k].cpu() for t, k in zip(tables, self.max_k)]
        self.max_nonlinearity = float(max_px)

    def _rand(self, high: int) -> int:
        return int(torch.randint(high, (1,), generator=self.gen))

    def triplet(self) -> Tuple[Clip, int, int, int]:
        for _ in range(1000):
            native = self.native_share > 0 and float(torch.rand(1, generator=self.gen)) < self.native_share
            idx = int(torch.multinomial(self.lengths if native else self.weights, 1, generator=self.gen))
            clip = self.clips[idx]
            kmax = 1 if native else self.max_k[idx]
            k1 = 1 + self._rand(kmax)
            k2 = k1 if self._rand(2) == 0 else 1 + self._rand(kmax)
            length = clip.frames.shape[0]
            if k1 + k2 >= length:
                continue
            start = self._rand(length - k1 - k2)
            if not clean_span(clip, start, start + k1 + k2):
                continue
            if self.nonlinearity is not None and self.nonlinearity[idx][start, k1 - 1, k2 - 1] > self.max_nonlinearity:
                continue
            return clip, start, start + k1, start + k1 + k2
        limit = (f" with non-linearity at most {self.max_nonlinearity} px (raise --max-nonlinearity)"
                 if self.nonlinearity is not None else "")
        raise RuntimeError(f"could not find a valid triplet{limit} in 1000 draws")

    def batch(self, size: int) -> Dict[str, torch.Tensor]:
        ones, mids, twos, times, befores, afters, quads = [], [], [], [], [], [], []
        for _ in range(size):
            clip, a, b, c = self.triplet()
            indices = (a, b, c)
            if self.neighbours:  # (no draw: the batches' triplets and crops stay those drawn without neighbours)
                span = c - a
                quad = clean_span(clip, a - span, c + span)
                if self.quadratic_share < 1.0:  # (no draw at 1: the stream of the all-quadratic stages stays)
                    quad = float(torch.rand(1, generator=self.gen)) < self.quadratic_share and quad
                indices = (a, b, c, a - span, c + span) if quad else (a, b, c, a, c)
                quads.append(float(quad))
            h, w = clip.frames.shape[2:]
            side = self.crop
            # (no draw unless enabled: the random stream of earlier recipes stays the same)
            if self.downscale_share > 0 and float(torch.rand(1, generator=self.gen)) < self.downscale_share:
                largest = min(2.0, h / self.crop, w / self.crop)
                side = int(self.crop * largest ** float(torch.rand(1, generator=self.gen)))
            y = self._rand(h - side + 1)
            x = self._rand(w - side + 1)
            window = (slice(None), slice(y, y + side), slice(x, x + side))
            frames = [clip.frames[i][window] for i in indices]  # views: one copy in the stack below
            if clip.frames.device != self.device:  # memory-mapped frames: the crops go to the GPU as uint8
                frames = list(to_device(torch.stack(frames), self.device))
            if side != self.crop:
                frames = resized(frames, self.crop)
            ones.append(frames[0])
            mids.append(frames[1])
            twos.append(frames[2])
            times.append((b - a) / (c - a))
            if self.neighbours:
                befores.append(frames[3])
                afters.append(frames[4])
        out = {
            "one": torch.stack(ones).float() / 255.0,
            "mid": torch.stack(mids).float() / 255.0,
            "two": torch.stack(twos).float() / 255.0,
            "t": to_device(torch.tensor(times, dtype=torch.float32), ones[0].device),
        }
        if self.neighbours:
            out["before"] = torch.stack(befores).float() / 255.0
            out["after"] = torch.stack(afters).float() / 255.0
            out["quad"] = to_device(torch.tensor(quads, dtype=torch.float32), ones[0].device)
        return augment(out, self.gen)


def resized(frames: Sequence[torch.Tensor], size: int) -> List[torch.Tensor]:
    """uint8 3 x S x S squares resized to ``size`` x ``size``: bilinear, antialiased where they shrink."""
    out = F.interpolate(torch.stack(list(frames)).float(), size=(size, size), mode="bilinear", align_corners=False,
                        antialias=True)
    return list(out.round_().clamp_(0, 255).to(torch.uint8))


# The fixed validation sets (name: generator seed, native_share, downscale_share): motion-weighted triplets with
# widened gaps (large motion); consecutive frames (the small motions of ordinary x2 interpolation, where blurring
# costs most); and consecutive frames cut up to 2x larger and shrunk, which removes most of the footage's
# compression noise (logged beside the score, which is the mean of the first two).
VALIDATION_SETS = {
    "motion-weighted": (1234, 0.0, 0.0),
    "consecutive": (4321, 1.0, 0.0),
    "clean": (777, 1.0, 1.0),
}
# the sets whose pixels near motion boundaries train.py also scores, pooled (the two of the score)
BOUNDARY_SETS = ("motion-weighted", "consecutive")


def frame_blend(one: torch.Tensor, two: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The simplest baseline: the two frames mixed with weights 1 - t and t (``t``: one time per sample)."""
    t = t.view(-1, 1, 1, 1)
    return (1 - t) * one + t * two


def validation_sets(clips: List[Clip], crop: int, max_gap: int = 4, batches: int = 4,
                    device: Optional[torch.device] = None) -> Dict[str, List[Dict[str, torch.Tensor]]]:
    """The batches of 16 triplets of every set in VALIDATION_SETS, the same on every call (the first 4 batches
    are the same whatever ``batches`` is), on ``device`` (default: the clips' frames' device)."""
    sets = {}
    for name, (seed, native, downscale) in VALIDATION_SETS.items():
        sampler = FootageSampler(clips, crop, max_gap, generator=torch.Generator().manual_seed(seed),
                                 native_share=native, downscale_share=downscale, device=device)
        sets[name] = [sampler.batch(16) for _ in range(batches)]
    return sets


def forward_differences(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Differences to the right and downward neighbour of every pixel of an N x C x H x W tensor (0 in the last
    column and row), each N x C x H x W."""
    gx = F.pad(x[..., :, 1:] - x[..., :, :-1], (0, 1, 0, 0))
    gy = F.pad(x[..., 1:, :] - x[..., :-1, :], (0, 0, 0, 1))
    return gx, gy


def dis_flows(pairs: Sequence[Tuple[np.ndarray, np.ndarray]], workers: int = 1) -> List[torch.Tensor]:
    """OpenCV DIS (medium preset) flow x -> y, a 2 x H x W CPU tensor, for each (x, y) pair of H x W uint8 grey
    images, on ``workers`` threads (OpenCV releases the GIL)."""
    import cv2

    def flow(pair: Tuple[np.ndarray, np.ndarray]) -> torch.Tensor:
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        return torch.from_numpy(dis.calc(pair[0], pair[1], None)).permute(2, 0, 1)

    if workers <= 1:
        return [flow(pair) for pair in pairs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(flow, pairs))


def dis_flow(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """OpenCV DIS (medium preset) flow a -> b for N x 3 x H x W images in [0, 1] (computed on the CPU, returned
    on their device)."""
    import cv2

    def gray(image: torch.Tensor) -> np.ndarray:
        return cv2.cvtColor((image.permute(1, 2, 0).float().cpu().numpy() * 255).round().astype("uint8"),
                            cv2.COLOR_RGB2GRAY)

    return torch.stack(dis_flows([(gray(x), gray(y)) for x, y in zip(a, b)])).to(a.device)


def motion_boundaries(one: torch.Tensor, two: torch.Tensor, step_px: float = 1.0, radius: int = 3) -> torch.Tensor:
    """N x 1 x H x W mask of the pixels within ``radius`` px of a motion boundary: where OpenCV DIS flow from
    ``one`` to ``two`` changes by more than ``step_px`` between neighbouring pixels (occlusions and the edges
    of moving objects, where interpolation errs most)."""
    gx, gy = forward_differences(dis_flow(one, two))
    edge = ((gx.norm(dim=1) + gy.norm(dim=1)) > step_px).float().unsqueeze(1)
    return F.max_pool2d(edge, 2 * radius + 1, 1, radius) > 0


def boundary_masks(sets: Dict[str, List[Dict[str, torch.Tensor]]]) -> Dict[str, List[torch.Tensor]]:
    """``motion_boundaries`` of every batch of the sets named in BOUNDARY_SETS, as train.py scores them."""
    return {name: [motion_boundaries(b["one"], b["two"]) for b in sets[name]] for name in BOUNDARY_SETS}


def synthetic_set(clips: List[Clip], crop: int, batches: int, small_share: float = 0.0, edge_px: float = 0.0,
                  seed: int = 1357, device: Optional[torch.device] = None,
                  **options: float) -> List[Dict[str, torch.Tensor]]:
    """Batches of 16 fixed synthetic triplets over ``clips``' textures (exact ground truth), the same on every call
    (the first k batches whatever ``batches`` is); ``options`` go to synthetic_batch (layers, motion_scale, ...)."""
    gen = torch.Generator().manual_seed(seed)
    sampler = FootageSampler(clips, crop, 4, generator=gen, device=device)
    return [synthetic_batch(sampler, 16, crop, gen=gen, small_share=small_share, edge_px=edge_px, **options)
            for _ in range(batches)]


def augment(batch: Dict[str, torch.Tensor], gen: Optional[torch.Generator]) -> Dict[str, torch.Tensor]:
    """Flips, rot90, channel order and temporal reversal, one choice per batch.

    Ground-truth flows, when present, are transformed along with the frames, and so are the outer neighbours
    (``before``, ``after``; swapped by the temporal reversal).
    """
    def coin() -> bool:
        return bool(torch.randint(2, (1,), generator=gen))

    keys = tuple(k for k in ("one", "mid", "two", "before", "after") if k in batch)
    flows = [k for k in ("flow_fwd", "flow_bwd") if k in batch]

    def apply(frame_op: Callable[[torch.Tensor], torch.Tensor],
              flow_op: Callable[[torch.Tensor], torch.Tensor]) -> None:
        for k in keys:
            batch[k] = frame_op(batch[k])
        for k in flows:
            batch[k] = flow_op(frame_op(batch[k]))

    def negate(component: int) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda f: torch.cat([-f[:, :1], f[:, 1:]], 1) if component == 0 else torch.cat([f[:, :1], -f[:, 1:]], 1)

    if coin():  # horizontal flip: u changes sign
        apply(lambda x: x.flip(3), negate(0))
    if coin():  # vertical flip: v changes sign
        apply(lambda x: x.flip(2), negate(1))
    if coin() and batch["one"].shape[2] == batch["one"].shape[3]:  # transpose (with the flips: rot90)
        apply(lambda x: x.transpose(2, 3), lambda f: f.flip(1))
    perm = torch.randperm(3, generator=gen).tolist()
    if perm != [0, 1, 2]:
        for k in keys:  # slices, not a list index: that would copy an index tensor to the GPU
            batch[k] = torch.cat([batch[k][:, i:i + 1] for i in perm], 1)
    if coin():  # temporal reversal
        batch["one"], batch["two"] = batch["two"], batch["one"]
        if "before" in batch:
            batch["before"], batch["after"] = batch["after"], batch["before"]
        batch["t"] = 1.0 - batch["t"]
        if "flow_fwd" in batch:
            batch["flow_fwd"], batch["flow_bwd"] = batch["flow_bwd"], batch["flow_fwd"]
    return batch


# ---------------------------------------------------------------- synthetic ---

def _affine(n: int, device: torch.device, gen: Optional[torch.Generator], max_shift: float, max_rot: float,
            max_scale: float) -> torch.Tensor:
    """Random per-sample motion parameters (shift x, shift y, rotation, log scale) at t = 1."""
    r = torch.rand(n, 4, generator=gen) * 2 - 1
    return to_device(r * torch.tensor([max_shift, max_shift, max_rot, max_scale]), device)


def _matrix(params: torch.Tensor, t: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """2x3 pixel-space affine map at time t: rotate/scale about ``centre``, then shift."""
    p = params * t.view(-1, 1)
    cos, sin = torch.cos(p[:, 2]), torch.sin(p[:, 2])
    s = torch.exp(p[:, 3])
    a = torch.stack([torch.stack([s * cos, -s * sin], 1), torch.stack([s * sin, s * cos], 1)], 1)  # n x 2 x 2
    shift = centre + p[:, :2] - torch.einsum("nij,nj->ni", a, centre)
    return torch.cat([a, shift.unsqueeze(2)], 2)


def _apply(m: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Map pixel coordinates grid (n x H x W x 2) through 2x3 matrices m."""
    return torch.einsum("nij,nhwj->nhwi", m[:, :, :2], grid) + m[:, None, None, :, 2]


def _invert(m: torch.Tensor) -> torch.Tensor:
    a = m[:, :, :2]
    # closed-form 2x2 inverse: torch.linalg.inv checks for singular input, which waits for the GPU
    det = a[:, 0, 0] * a[:, 1, 1] - a[:, 0, 1] * a[:, 1, 0]
    inv = torch.stack([torch.stack([a[:, 1, 1], -a[:, 0, 1]], 1),
                       torch.stack([-a[:, 1, 0], a[:, 0, 0]], 1)], 1) / det.view(-1, 1, 1)
    return torch.cat([inv, -torch.einsum("nij,nj->ni", inv, m[:, :, 2]).unsqueeze(2)], 2)


def _sample(texture: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    h, w = texture.shape[2:]
    norm = torch.stack([coords[..., 0] * 2 / (w - 1) - 1, coords[..., 1] * 2 / (h - 1) - 1], -1)
    return F.grid_sample(texture, norm, mode="bilinear", padding_mode="reflection", align_corners=True)


def _radial(src: torch.Tensor, centre: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
    """Squared distance of layer-space points from a layer's centre in units of its elliptical boundary's radii
    (1 on the edge)."""
    d = (src - centre.view(-1, 1, 1, 2)) / radius.view(-1, 1, 1, 2)
    return d.pow(2).sum(-1)


def _check_scene_options(small_share: float, edge_px: float, edge_share: float, layers: int,
                         motion_scale: float, stripe_share: float) -> None:
    for name, share in (("small_share", small_share), ("edge_share", edge_share), ("stripe_share", stripe_share)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {share}")
    if edge_px < 0:
        raise ValueError(f"edge_px must be 0 (the original soft edge) or a width in pixels, got {edge_px}")
    if layers < 1:
        raise ValueError(f"layers must be at least 1 (a background and a moving layer over it), got {layers}")
    if not motion_scale > 0:
        raise ValueError(f"motion_scale must be positive, got {motion_scale}")


def _layer_textures(sampler: FootageSampler, size: int, crop: int, count: int,
                    gen: Optional[torch.Generator]) -> torch.Tensor:
    """``count`` textures per sample (count x size x 3 x crop x crop in [0, 1]), cut from random frames."""
    textures = []
    for _ in range(count):
        cuts = []
        for _ in range(size):
            clip = sampler.clips[int(torch.multinomial(sampler.weights, 1, generator=gen))]
            f = clip.frames[sampler._rand(clip.frames.shape[0])]
            h, w = f.shape[1:]
            y, x = sampler._rand(h - crop + 1), sampler._rand(w - crop + 1)
            cuts.append(f[:, y:y + crop, x:x + crop])
        textures.append(to_device(torch.stack(cuts), sampler.device).float().div(255.0))
    return torch.stack(textures)


def _gratings(textures: torch.Tensor, share: float, gen: Optional[torch.Generator],
              grid: torch.Tensor) -> torch.Tensor:
    """``textures`` (layers x samples x 3 x crop x crop) with a ``share`` of them replaced by gratings: straight
    stripes of one period (4-16 px, log-uniform), angle and phase between two random colours, with a profile from
    sinusoidal to nearly square (slats, blinds, railings), and the footage texture's detail kept at a fifth of its
    contrast so that a flow one period off does not match exactly. ``grid``: each pixel's (x, y), crop x crop x 2."""
    layers, size = textures.shape[:2]
    device = textures.device

    def draw(*shape: int) -> torch.Tensor:
        return to_device(torch.rand(layers, size, *shape, generator=gen), device)

    pick = draw() < share
    period, angle, phase = 4.0 * 4.0 ** draw(1, 1), draw(1, 1) * math.pi, draw(1, 1) * (2 * math.pi)
    hardness = 0.5 * 16.0 ** draw(1, 1)  # 0.5 (a sinusoid) to 8 (nearly square)
    low, high = draw(3, 1, 1), draw(3, 1, 1)
    along = grid[..., 0] * torch.cos(angle) + grid[..., 1] * torch.sin(angle)  # layers x samples x crop x crop
    wave = torch.tanh(hardness * torch.sin(along * (2 * math.pi) / period + phase)) / torch.tanh(hardness)
    grating = low + (high - low) * ((wave + 1) / 2).unsqueeze(2)
    detail = textures - textures.mean(dim=(3, 4), keepdim=True)
    grating = (grating + 0.2 * detail).clamp(0.0, 1.0)
    return torch.where(pick[..., None, None, None], grating, textures)


def _render(motions: Sequence[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]], textures: torch.Tensor,
            times: Dict[str, torch.Tensor], grid: torch.Tensor, sharpness: Sequence[Union[float, torch.Tensor]],
            backgrounds: Optional[Dict[str, torch.Tensor]]
            ) -> Tuple[Dict[str, torch.Tensor], Dict[Tuple[str, int], torch.Tensor]]:
    """The three frames of layered scenes, back to front, and the layer-space point each output pixel shows at each
    time (``sources[time, layer]``), which the true flow reuses."""
    frames = {}
    sources = {}  # (time, layer): the layer-space point each output pixel shows, reused by the flow below
    for key, tt in times.items():
        img = None
        for layer, (params, centre, radius) in enumerate(motions):
            src = sources[key, layer] = _apply(_invert(_matrix(params, tt, centre)), grid)
            colour = _sample(textures[layer], src)
            if layer == 0:
                img = colour if backgrounds is None else backgrounds[key]
                continue
            inside = 1.0 - _radial(src, centre, radius).sqrt()  # 0 on the edge, in units of its radius
            mask = torch.sigmoid(inside * sharpness[layer]).unsqueeze(1)
            img = mask * colour + (1 - mask) * img
        frames[key] = img
    return frames, sources


def _true_flows(motions: Sequence[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]], times: Dict[str, torch.Tensor],
                grid: torch.Tensor, sources: Dict[Tuple[str, int], torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Forward and backward flow: the topmost layer covering each pixel at the start time decides its motion."""
    flows = {}
    for name, start, end in (("flow_fwd", "one", "two"), ("flow_bwd", "two", "one")):
        flow = None
        for layer, (params, centre, radius) in enumerate(motions):
            src = sources[start, layer]
            dst = _apply(_matrix(params, times[end], centre), src)
            f = (dst - grid).permute(0, 3, 1, 2)
            if layer == 0:
                flow = f
                continue
            mask = (_radial(src, centre, radius) < 1.0).unsqueeze(1).float()
            flow = mask * f + (1 - mask) * flow
        flows[name] = flow
    return flows


def sensor_noise(batch: Dict[str, torch.Tensor], max_sigma: float, gen: torch.Generator) -> Dict[str, torch.Tensor]:
    """``batch`` with camera-like sensor noise on its frames (``one``, ``mid`` and ``two``, each its own draw):
    Gaussian, of a standard deviation drawn per sample uniformly in [0, ``max_sigma``] (images in [0, 1]), clamped.
    The noise itself is drawn on the frames' device, from a seed drawn from ``gen``, so that the batches stay those of
    the seed. A real camera's frames of a still scene are never equal; the target frame is as noisy as the inputs, so
    no loss rewards a network for removing noise or for making it."""
    frames = [batch[k] for k in ("one", "mid", "two")]
    n, device = frames[0].shape[0], frames[0].device
    sigma = to_device(torch.rand(n, generator=gen) * max_sigma, device).view(n, 1, 1, 1)
    draw = torch.Generator(device).manual_seed(int(torch.randint(2 ** 62, (1,), generator=gen)))
    noisy = [(f + sigma * torch.randn(f.shape, generator=draw, device=device, dtype=f.dtype)).clamp(0.0, 1.0)
             for f in frames]
    return {**batch, **dict(zip(("one", "mid", "two"), noisy))}


def synthetic_batch(sampler: FootageSampler, size: int, crop: int, layers: int = 2,
                    gen: Optional[torch.Generator] = None, small_share: float = 0.0,
                    edge_px: float = 0.0, edge_share: float = 1.0,
                    motion_scale: float = 1.0, stripe_share: float = 0.0,
                    backgrounds: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
    """Layered affine motion over real textures, with ground-truth bidirectional flow: a background and
    ``layers`` elliptical layers over it, each with its own motion.

    ``backgrounds``: real triplets (``one``, ``mid``, ``two``, ``t`` of ``size`` samples) to paste the moving layers
    over instead of a synthetic background: new occlusions over real motion (``paste_layers``). Their own motion is
    unknown, so the batch then has no flow.

    ``small_share``: fraction of samples whose motions are scaled down by 2 to 16 times (log-uniform),
    so that sub-pixel and few-pixel motion, where splatting blurs fine detail, is represented too.
    ``edge_px``: width in pixels of a layer's edge (its mask's 10-90% rise, antialiased); 0 keeps the original
    edge, which rises over 37% of the layer's radius (9-33 px), much softer than the edges of real objects.
    ``edge_share``: with ``edge_px`` > 0, the fraction of samples whose layers get those edges (the rest keep the
    original soft edge), so that both kinds of boundary are trained.
    ``motion_scale``: multiplies the largest shift of every layer (12 px for the background, 32 px for the
    layers, between t = 0 and 1), for larger motions; rotations and scalings stay as they are.
    ``stripe_share``: the fraction of layers (the background included) textured with gratings of 4-16 px period
    instead (``_gratings``): fine repeating stripes such as blinds, which a flow one period off nearly matches.
    """
    _check_scene_options(small_share, edge_px, edge_share, layers, motion_scale, stripe_share)
    device = sampler.device
    textures = _layer_textures(sampler, size, crop, layers + 1, gen)
    if backgrounds is not None:
        if any(backgrounds[k].shape != (size, 3, crop, crop) for k in ("one", "mid", "two")):
            raise ValueError(f"backgrounds must be {size} x 3 x {crop} x {crop} frames, got "
                             f"{tuple(backgrounds['one'].shape)}")
        t = backgrounds["t"]
    else:
        t = to_device(torch.rand(size, generator=gen) * 0.8 + 0.1, device)
    ys, xs = torch.meshgrid(torch.arange(crop, device=device, dtype=torch.float32),
                            torch.arange(crop, device=device, dtype=torch.float32), indexing="ij")
    grid = torch.stack([xs, ys], -1).expand(size, crop, crop, 2)
    times = {"one": torch.zeros_like(t), "mid": t, "two": torch.ones_like(t)}
    motions = []
    shrink = 1.0
    if small_share > 0:  # (no draws otherwise: the random stream of earlier recipes stays the same)
        small = torch.rand(size, generator=gen) < small_share
        factor = torch.where(small, 2.0 ** -(1.0 + 3.0 * torch.rand(size, generator=gen)), torch.ones(size))
        shrink = to_device(factor.view(-1, 1), device)
    for layer in range(layers + 1):
        if layer == 0:
            params = _affine(size, device, gen, 12.0 * motion_scale, 0.05, 0.05) * shrink
            centre = torch.full((size, 2), crop / 2, device=device)
        else:
            params = _affine(size, device, gen, 32.0 * motion_scale, 0.3, 0.15) * shrink
            centre = to_device(torch.rand(size, 2, generator=gen) * crop, device)
        radius = to_device((torch.rand(size, 2, generator=gen) * 0.25 + 0.1) * crop, device)
        motions.append((params, centre, radius))
    sharp = None  # per sample: whether its layers get edge_px edges (None: all of them); drawn after the motions,
    if edge_px > 0 and 0.0 < edge_share < 1.0:  # so every share renders the same scenes (and 0 or 1 draw nothing)
        sharp = to_device(torch.rand(size, generator=gen) < edge_share, device).view(-1, 1, 1)
    sharpness = [12.0] * len(motions)  # per layer: the slope of its mask at the edge (12: the original soft edge)
    if edge_px > 0 and edge_share > 0:
        for layer, (_, _, radius) in enumerate(motions):
            # in pixels (layer space, near enough for these mild scalings): a 10-90% rise of edge_px
            crisp = 2.0 * math.log(9.0) / edge_px * radius.mean(-1).view(-1, 1, 1)
            sharpness[layer] = crisp if sharp is None else torch.where(sharp, crisp, torch.full_like(crisp, 12.0))
    if stripe_share > 0:  # drawn last, so the scenes' motions are those of the same call without stripes
        textures = _gratings(textures, stripe_share, gen, grid[0])
    frames, sources = _render(motions, textures, times, grid, sharpness, backgrounds)
    if backgrounds is not None:  # the real background's motion is unknown: no flow to supervise
        return augment({"one": frames["one"], "mid": frames["mid"], "two": frames["two"], "t": t}, gen)
    flows = _true_flows(motions, times, grid, sources)
    batch = {"one": frames["one"], "mid": frames["mid"], "two": frames["two"], "t": t, **flows}
    return augment(batch, gen)


def paste_layers(batch: Dict[str, torch.Tensor], sampler: FootageSampler, share: float, crop: int,
                 gen: Optional[torch.Generator] = None, **options: float) -> Dict[str, torch.Tensor]:
    """``share`` of a footage batch's triplets with one synthetic moving layer pasted over each
    (``synthetic_batch`` with ``backgrounds``; ``options`` as there): new occluding objects over real motion, so
    the same footage shows new occlusions. The others pass unchanged."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"paste share must lie in [0, 1], got {share}")
    n = batch["one"].shape[0]
    chosen = (torch.rand(n, generator=gen) < share).nonzero().flatten()
    if chosen.numel() == 0:
        return batch
    index = to_device(chosen, batch["one"].device)
    keys = ("one", "mid", "two", "t")
    pasted = synthetic_batch(sampler, int(chosen.numel()), crop, layers=1, gen=gen,
                             backgrounds={k: batch[k][index] for k in keys}, **options)
    out = dict(batch)
    for k in keys:
        out[k] = batch[k].clone()
        out[k][index] = pasted[k]
    if "quad" in batch:  # the pasted layer moves at constant velocity between one and two, not in the neighbours
        out["quad"] = batch["quad"].clone()
        out["quad"][index] = 0.0
    return out
