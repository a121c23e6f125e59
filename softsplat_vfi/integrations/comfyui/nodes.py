"""ComfyUI nodes: load a network from weights/, interpolate IMAGE batches with the video tool's own schedule.

Conventions (ComfyUI's)
-----------------------
- IMAGE: B x H x W x 3 float tensors, RGB in [0, 1]; MASK: B x H x W float tensors, 1 where a pixel is transparent
  (ComfyUI's LoadImage gives 1 - alpha; SplitImageWithAlpha / JoinImageWithAlpha use the same), so alpha = 1 - mask.
- The interface follows ComfyUI core's own interpolation nodes (April 2026: FrameInterpolationModelLoader, category
  "loaders", and FrameInterpolate, "image/video", inputs ``interp_model``, ``images``, ``multiplier``), with its own
  model type so that neither model is wired into the other's node.

How frames are made
-------------------
The batch goes through ``pipeline.video.stream_frames`` exactly as a video does: de-duplication, scene-cut
detection and quadratic paths through the frames beside each pair (``engine.Interpolator``'s
``interpolate_integer_with_neighbours``). Frames cross it as 16-bit integers (``quantize``: 1/65535 steps, far below
8-bit footage's 1/255); output frames that are input frames are the input tensors' values, exactly. One pair is
interpolated at a time and every result goes to the CPU at once, so device memory does not grow with the batch.
Frames are made as the node takes them, in output order (the engine's ``lazy_frames``: along quadratic paths each t
on its own call, from the pair's flows estimated once; the other paths make a pair's frames in one call): ComfyUI's
progress bar advances by one output frame, and its interrupt check (Cancel) runs before each output frame and before
each pair, so no network call starts after a Cancel.
Output frame j is at time j / output fps: without ``loop`` from the first frame to the last ((B - 1) x multiplier + 1
frames, as ComfyUI core's node), with ``loop`` also from the last frame back to the first (B x multiplier).

Nothing is downloaded and CuPy is not needed (on CUDA without it, the operator's PyTorch path runs).
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from ...engine.about import CODE_LICENCE, WEIGHTS_TERMS  # (it imports nothing: the descriptions need no torch)

if TYPE_CHECKING:
    import numpy as np
    import torch

MODEL_TYPE = "SOFTSPLAT_MODEL"
MODELS = {"default": "network", "fast": "fast"}  # the names shown, and their files in weights/
# input frames kept by identity so that a copied frame is returned as the input tensor's values: more than the
# schedule holds at once (prefetch depth, the pair, its neighbours, the one ahead)
_KEPT = 32


TERMS = f"{WEIGHTS_TERMS} {CODE_LICENCE}"


@dataclass
class SoftsplatModel:
    """What the loader node gives the interpolate node: a maker of engines and the terms of its weights. Each run
    gets its own engine (``new_engine()``, all sharing one loaded network), so that the flows it keeps for
    quadratic paths and its CUDA graphs are freed when the run ends instead of staying on the device."""

    new_engine: Callable[[], Any]  # () -> engine.Interpolator (anything with the pipeline's interpolator interface)
    weights: Path
    terms: str


def load_model(model_name: str = "default", device: str = "auto", precision: str = "auto",
               weights_path: str = "") -> SoftsplatModel:
    """The network of weights/<model_name> (or ``weights_path``) on ``device`` with ``precision``."""
    from ...engine import Interpolator, InterpolatorOptions
    from ...engine.about import LICENCE_KEY
    from ...engine.options import ROOT
    from ...model.weights import read_metadata

    if weights_path.strip():
        weights = Path(weights_path.strip()).expanduser()
        if not weights.is_file():
            raise ValueError(f"weights_path {weights}: no such file: give a .safetensors file, or leave it empty for "
                             f"model_name")
    elif model_name in MODELS:
        weights = ROOT / "weights" / f"{MODELS[model_name]}.safetensors"  # the package's, as the CLI's --model
    else:
        raise ValueError(f"model_name {model_name!r}: use {' or '.join(MODELS)}, or a weights_path")
    # (the flow scale: the weights file's own default, as every way in runs it)
    options = InterpolatorOptions(weights=weights, device=device, precision=precision)
    loaded = Interpolator(options)  # loaded now: a missing or unfit file is said by the loader node
    terms = read_metadata(weights).get(LICENCE_KEY, "") if weights.suffix == ".safetensors" else ""
    if terms:
        print(f"softsplat-vfi: {weights.name}: {terms}", file=sys.stderr)
    return SoftsplatModel(functools.partial(Interpolator, loaded.options, loaded.network, lazy_frames=True), weights,
                          terms)


def quantize(image: "torch.Tensor") -> "np.ndarray":
    """An H x W x C float tensor in [0, 1] as a uint16 array (the integer frames the video schedule runs on)."""
    import numpy as np

    return np.rint(np.clip(image.detach().float().cpu().numpy(), 0.0, 1.0) * 65535.0).astype(np.uint16)


def output_count(frames: int, rate_in: Fraction, rate_out: Fraction, loop: bool) -> int:
    """How many output frames ``frames`` input frames give: at times j / rate_out up to the last frame's time, or
    with ``loop`` before the time the first frame would come again."""
    if loop:
        return math.ceil(frames * rate_out / rate_in)
    return math.floor((frames - 1) * rate_out / rate_in) + 1


def rates(fps: float, multiplier: int, target_fps: float) -> Tuple[Fraction, Fraction]:
    """(source rate, output rate) as exact fractions (23.976 is 24000/1001); ValueError naming the input to fix."""
    from ...media.video import parse_rate

    if not fps > 0:
        raise ValueError(f"fps {fps}: give the source frame rate, above 0")
    rate_in = parse_rate(repr(float(fps)))
    if target_fps and target_fps > 0:
        return rate_in, parse_rate(repr(float(target_fps)))
    if target_fps < 0 or multiplier < 1:
        raise ValueError(f"multiplier {multiplier}, target_fps {target_fps}: use a multiplier of 1 or more, or a "
                         f"target_fps above 0")
    return rate_in, rate_in * multiplier


def interpolate_batch(model: SoftsplatModel, images: "torch.Tensor", multiplier: int = 2, fps: float = 24.0,
                      target_fps: float = 0.0, scene_threshold: float = 0.12, dedup_threshold: float = 0.0,
                      loop: bool = False, motion: str = "quadratic",
                      mask: Optional["torch.Tensor"] = None) -> Tuple["torch.Tensor", float, "torch.Tensor"]:
    """(images, output fps, mask) for an IMAGE batch; see the module docstring."""
    import numpy as np
    import torch

    from ...pipeline.schedule import Plan
    from ...pipeline.video import VideoOptions, frame_made, stream_frames

    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images of shape {tuple(images.shape)}: give a B x H x W x 3 IMAGE batch (RGBA: split the "
                         f"alpha off with SplitImageWithAlpha and pass it as mask)")
    count_in, height, width = images.shape[0], images.shape[1], images.shape[2]
    if mask is not None:
        mask = mask if mask.ndim == 3 else mask[None]
        if mask.shape[1:] != (height, width) or mask.shape[0] not in (1, count_in):
            raise ValueError(f"mask of shape {tuple(mask.shape)}: give one {height} x {width} mask per image (or one "
                             f"for all)")
        mask = mask.expand(count_in, height, width)
    rate_in, rate_out = rates(fps, multiplier, target_fps)
    options = VideoOptions(scene_threshold=scene_threshold, dedup_threshold=dedup_threshold, motion=motion)
    if count_in < 2:
        return images, float(rate_out), mask if mask is not None else torch.zeros(count_in, height, width)
    count = output_count(count_in, rate_in, rate_out, loop)
    order = list(range(count_in)) + ([0] if loop else [])  # with loop the first frame comes again after the last
    kept: "OrderedDict[int, Tuple[np.ndarray, int]]" = OrderedDict()

    def frames() -> Iterator[np.ndarray]:
        for index in order:
            frame = quantize(images[index])
            if mask is not None:
                frame = np.concatenate([frame, quantize(1.0 - mask[index])[:, :, None]], axis=2)
            kept[id(frame)] = (frame, index)
            while len(kept) > _KEPT:
                kept.popitem(last=False)
            yield frame

    out = torch.empty((count, height, width, 3), dtype=torch.float32)
    out_mask = torch.zeros((count, height, width), dtype=torch.float32)
    plan = Plan(rate_out, count, 1 / rate_out)
    stamps = [Fraction(i) / rate_in for i in range(len(order))]
    interrupted, advance = comfy_hooks(count)
    made = stream_frames(frames(), stamps, plan, model.new_engine(), options, {}, later=True, before_pair=interrupted)
    with contextlib.closing(made):  # (closed on a Cancel too: the read-ahead thread stops)
        for j, pending in made:
            interrupted()
            frame = frame_made(pending)  # an interpolated frame is made here, one t at a time
            source = kept.get(id(frame))
            if source is not None and source[0] is frame:  # an input frame: its own values
                out[j] = images[source[1]].float().cpu()
                if mask is not None:
                    out_mask[j] = mask[source[1]].float().cpu()
            else:
                values = torch.from_numpy(frame.astype(np.float32) / 65535.0)
                out[j] = values[:, :, :3]
                if mask is not None:
                    out_mask[j] = 1.0 - values[:, :, 3]
            advance()
    return out, float(rate_out), out_mask


def _nothing() -> None:
    return None


def comfy_hooks(total: int) -> Tuple[Callable[[], None], Callable[[], None]]:
    """(interrupted, advance): ComfyUI's interrupt check, which raises once Cancel is pressed, and one step of a
    progress bar of ``total`` steps, where ComfyUI runs the node; calls that do nothing elsewhere."""
    try:
        from comfy.model_management import throw_exception_if_processing_interrupted as interrupted
    except ImportError:
        interrupted = _nothing
    try:
        from comfy.utils import ProgressBar
    except ImportError:
        return interrupted, _nothing
    return interrupted, functools.partial(ProgressBar(total).update, 1)


class SoftsplatModelLoader:
    """Loads a network from the repository's weights/ folder."""

    DESCRIPTION = ("Loads a softmax-splatting frame interpolation network from the repository's weights/ folder "
                   "(default: the better one; fast: about twice the speed on a GPU), or a .safetensors file, "
                   "never downloaded. " + TERMS)
    CATEGORY = "loaders"
    RETURN_TYPES = (MODEL_TYPE,)
    RETURN_NAMES = ("interp_model",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls) -> Dict[str, Dict[str, tuple]]:
        return {
            "required": {
                "model_name": (list(MODELS), {"default": "default", "tooltip": "weights/network.safetensors "
                                              "(default) or weights/fast.safetensors (fast). " + TERMS}),
                "device": (["auto", "cpu", "cuda"], {"default": "auto", "tooltip": "auto: the GPU where there is one"}),
                "precision": (["auto", "fp32", "fp16", "bf16"], {
                    "default": "auto", "tooltip": "auto: bf16 on GPUs of compute capability 8.0 and up, else fp32"}),
            },
            "optional": {
                "weights_path": ("STRING", {"default": "", "tooltip": "a .safetensors weights file instead of "
                                            "model_name (trained with train.py)"}),
            },
        }

    def load(self, model_name: str, device: str, precision: str, weights_path: str = "") -> Tuple[SoftsplatModel]:
        return (load_model(model_name, device, precision, weights_path),)


class SoftsplatInterpolate:
    """Interpolates an IMAGE batch to a multiple of its frame rate, or to a target rate."""

    DESCRIPTION = ("Interpolates an IMAGE batch with softmax splatting, as the video tool does: frames along "
                   "quadratic paths through their neighbours, no frames made across scene cuts, repeated frames "
                   "skipped. Returns the frames, their frame rate and the mask (alpha) moved with them. " + TERMS)
    CATEGORY = "image/video"
    RETURN_TYPES = ("IMAGE", "FLOAT", "MASK")
    RETURN_NAMES = ("images", "fps", "mask")
    FUNCTION = "interpolate"

    @classmethod
    def INPUT_TYPES(cls) -> Dict[str, Dict[str, tuple]]:
        return {
            "required": {
                "interp_model": (MODEL_TYPE,),
                "images": ("IMAGE",),
                "multiplier": ("INT", {"default": 2, "min": 1, "max": 16, "tooltip": "output frames per input "
                                       "frame (unless target_fps is set)"}),
                "fps": ("FLOAT", {"default": 24.0, "min": 0.001, "max": 1000.0, "step": 0.001,
                                  "tooltip": "the frame rate of the input images (23.976 and 29.97 are read as "
                                             "24000/1001 and 30000/1001)"}),
                "target_fps": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1000.0, "step": 0.001,
                                         "tooltip": "output frame rate; 0: fps x multiplier"}),
                "scene_threshold": ("FLOAT", {"default": 0.12, "min": 0.0, "max": 1.0, "step": 0.01,
                                              "tooltip": "mean grey difference above which two frames are a cut "
                                                         "and not interpolated; 0 = off"}),
                "dedup_threshold": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 0.1, "step": 0.001,
                                              "tooltip": "drop frames closer than this to the previous one and "
                                                         "interpolate across them (0.002 for repeated frames); 0 = "
                                                         "off"}),
                "loop": ("BOOLEAN", {"default": False, "tooltip": "also interpolate from the last frame back to "
                                     "the first, for a seamless loop"}),
                "motion": (["quadratic", "linear"], {"default": "quadratic", "tooltip": "quadratic: along paths "
                           "through the frames on either side of each pair; linear: constant velocity"}),
            },
            "optional": {
                "mask": ("MASK", {"tooltip": "transparency (1 - alpha), moved with the flow"}),
            },
        }

    def interpolate(self, interp_model: SoftsplatModel, images: "torch.Tensor", multiplier: int, fps: float,
                    target_fps: float, scene_threshold: float, dedup_threshold: float, loop: bool, motion: str,
                    mask: Optional["torch.Tensor"] = None) -> Tuple["torch.Tensor", float, "torch.Tensor"]:
        return interpolate_batch(interp_model, images, multiplier, fps, target_fps, scene_threshold,
                                 dedup_threshold, loop, motion, mask)


NODE_CLASS_MAPPINGS: Dict[str, type] = {
    "SoftsplatModelLoader": SoftsplatModelLoader,
    "SoftsplatInterpolate": SoftsplatInterpolate,
}
NODE_DISPLAY_NAME_MAPPINGS: Dict[str, str] = {
    "SoftsplatModelLoader": "Load Softsplat Interpolation Model",
    "SoftsplatInterpolate": "Softsplat Frame Interpolate",
}
__all__: List[str] = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
