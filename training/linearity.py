"""How far footage triplets stray from constant velocity, measured with OpenCV DIS flow.

For a triplet (a, b, c) with t = (b - a) / (c - a), let f_a and f_c be the flows from the middle frame b to a
and to c. Under constant velocity v every pixel of b lies at -t v in a and at (1 - t) v in c, so
``(1 - t) f_a + t f_c`` is zero; its length is how far, in pixels, a perfect two-frame method that assumes
constant velocity would misplace that pixel of b. Its mean over the frame is the triplet's *non-linearity*.

Triplets with a large one teach a network to hedge (blur between the places where an object could be), since
two frames cannot tell where it is; ``train.py --max-nonlinearity PX`` leaves them out of training, and
train.py logs validation PSNR on the held-out triplets below ``NEAR_LINEAR_PX`` beside the score.

    python -m training.linearity --data .data/footage --out .data/nonlinearity.pt   # once: 6 minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from softsplat_vfi.engine.options import DefaultsFormatter
from training.data import Clip, dis_flows

NEAR_LINEAR_PX = 1.0  # validation triplets whose crop's non-linearity is at most this are the near-linear subset
TABLE_SCALE = 0.5  # the clips' tables are measured on frames shrunk by this factor (4x fewer pixels for DIS)
TABLE_VERSION = 1


def _gray(frames: torch.Tensor, scale: float) -> torch.Tensor:
    """T x 3 x H x W frames (uint8 or float in [0, 1], any device) as T x H' x W' uint8 grey on the CPU."""
    x = frames.float()
    if frames.dtype == torch.uint8:
        x = x / 255.0
    if scale != 1.0:
        x = F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False, antialias=True)
    grey = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    return (grey * 255.0).round_().clamp_(0, 255).to(torch.uint8).cpu()


def residual(flow_to_one: torch.Tensor, flow_to_two: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Mean length of ``(1 - t) f_a + t f_c`` per sample (N x 2 x H x W flows from the middle frame, N times)."""
    t = t.view(-1, 1, 1, 1).to(flow_to_one)
    return ((1 - t) * flow_to_one + t * flow_to_two).norm(dim=1).mean(dim=(1, 2))


def triplet_nonlinearity(one: torch.Tensor, mid: torch.Tensor, two: torch.Tensor, t: torch.Tensor,
                         workers: int = 8) -> torch.Tensor:
    """Non-linearity in pixels of each triplet of N x 3 x H x W images in [0, 1] (a CPU tensor of N)."""
    g_one, g_mid, g_two = (_gray(x, 1.0) for x in (one, mid, two))
    n = g_mid.shape[0]
    flows = dis_flows([(g_mid[i].numpy(), g_one[i].numpy()) for i in range(n)]
                      + [(g_mid[i].numpy(), g_two[i].numpy()) for i in range(n)], workers)
    return residual(torch.stack(flows[:n]), torch.stack(flows[n:]), t.cpu())


def near_linear_subsets(sets: Dict[str, List[Dict[str, torch.Tensor]]], names: Sequence[str],
                        max_px: float = NEAR_LINEAR_PX) -> Dict[str, List[torch.Tensor]]:
    """For each batch of the sets ``names``, a CPU bool per triplet: its non-linearity is at most ``max_px``."""
    return {name: [triplet_nonlinearity(b["one"], b["mid"], b["two"], b["t"]) <= max_px for b in sets[name]]
            for name in names}


def clip_nonlinearity(frames: torch.Tensor, max_k: int, scale: float = TABLE_SCALE, workers: int = 8) -> torch.Tensor:
    """A T x max_k x max_k table for the triplets (a, a + k1, a + k1 + k2) of one clip's T frames: entry
    [a, k1 - 1, k2 - 1] is the triplet's non-linearity in pixels of the stored frames (NaN where c lies past the
    end). Cuts and repeated frames are not looked at: the sampler rejects those triplets on its own."""
    length = frames.shape[0]
    grey = _gray(frames, scale)
    # flows from every middle frame b to b - k and b + k, k = 1..max_k: 2 max_k flows per frame at most
    keys = [(b, d) for b in range(length) for k in range(1, max_k + 1) for d in (-k, k) if 0 <= b + d < length]
    flows = dict(zip(keys, dis_flows([(grey[b].numpy(), grey[b + d].numpy()) for b, d in keys], workers)))
    table = torch.full((length, max_k, max_k), float("nan"))
    for a in range(length):
        for k1 in range(1, max_k + 1):
            b = a + k1
            for k2 in range(1, max_k + 1):
                if b + k2 >= length:
                    break
                t = torch.tensor([k1 / (k1 + k2)])
                table[a, k1 - 1, k2 - 1] = residual(flows[(b, -k1)][None], flows[(b, k2)][None], t)[0] / scale
    return table


def measured(tables: Sequence[torch.Tensor]) -> torch.Tensor:
    """The defined entries of ``clip_nonlinearity`` tables, as one flat tensor (the NaNs past clip ends dropped)."""
    return torch.cat([t[~t.isnan()] for t in tables])


def nonlinearity_tables(clips: Sequence[Clip], max_ks: Sequence[int], cache: Optional[Path] = None, workers: int = 8,
                        write: bool = True, log: Callable[[str], None] = print) -> List[torch.Tensor]:
    """One ``clip_nonlinearity`` table per clip (``training.data.Clip``), with the k range ``max_ks`` gives;
    read from ``cache`` where it holds the clip with at least that range, and (``write``) the cache rewritten
    with any computed."""
    stored: Dict[str, torch.Tensor] = {}
    if cache is not None and cache.exists():
        data = torch.load(cache, map_location="cpu")
        if data.get("version") == TABLE_VERSION and data.get("scale") == TABLE_SCALE:
            stored = data["tables"]
    tables, computed = [], 0
    for clip, max_k in zip(clips, max_ks):
        table = stored.get(clip.name)
        if table is None or table.shape[1] < max_k or table.shape[0] != clip.frames.shape[0]:
            table = clip_nonlinearity(clip.frames, max_k, workers=workers)
            stored[clip.name] = table
            computed += 1
        tables.append(table[:, :max_k, :max_k])
    if computed:
        log(f"non-linearity: measured {computed} of {len(tables)} clips with OpenCV DIS"
            + (f", saved to {cache}" if cache is not None and write else ""))
        if cache is not None and write:
            cache.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"version": TABLE_VERSION, "scale": TABLE_SCALE, "tables": stored}, cache)
    return tables


def main(argv: Optional[List[str]] = None) -> int:
    from training.config import TrainConfig
    from training.data import gap_limits, load_clips, require_clips

    p = argparse.ArgumentParser(description="Measure the footage triplets' non-linearity once, for "
                                            "train.py --max-nonlinearity (which otherwise measures it itself).",
                                formatter_class=DefaultsFormatter)
    p.add_argument("--data", type=Path, required=True, help="footage folder with clips.jsonl")
    p.add_argument("--out", type=Path, required=True, help="the table file to write (or complete)")
    p.add_argument("--workers", type=int, default=8, help="DIS threads")
    args = p.parse_args(argv)
    config = TrainConfig()
    clips = load_clips(args.data, None, torch.device("cpu"), config.crop, exclude=config.validation_clips)
    require_clips(clips)
    # the k range the sampler draws each clip's triplets from, so that train.py finds its tables complete
    tables = nonlinearity_tables(clips, gap_limits(clips, config.max_gap), args.out, args.workers)
    values = measured(tables)
    quantiles = torch.quantile(values, torch.tensor([0.25, 0.5, 0.75, 0.9])).tolist()
    print(f"{len(clips)} clips, {values.numel()} triplets: non-linearity quartiles "
          + " / ".join(f"{q:.2f}" for q in quantiles[:3]) + f" px, 90th percentile {quantiles[3]:.2f} px")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
