"""Interpolate between two images with softmax splatting.

    python run.py --one images/one.png --two images/two.png --out mid.png
    python run.py --one a.png --two b.png --time 0.25 0.5 0.75 --out out-{i}.png
    python run.py --video in.mp4 --out out.mp4              # twice the frame rate, same duration

Python API: ``run.interpolate_files(...)``, ``model.inference.interpolate(net, one, two, times)``
and the published ``run.estimate(tenOne, tenTwo, fltTimes)``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Union

import torch

ROOT = Path(__file__).resolve().parent
DEFAULT_WEIGHTS = ROOT / "weights" / "network.safetensors"


def build_parser() -> argparse.ArgumentParser:
    from media.video import PRESETS

    p = argparse.ArgumentParser(description="Video frame interpolation with softmax splatting.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--one", type=Path, help="first frame (png/jpg/bmp/tif/webp; 8/16-bit; gray, RGB or RGBA)")
    p.add_argument("--two", type=Path, help="second frame, same size as --one")
    p.add_argument("--out", type=Path, help="output image; with several --time values use {i} or {t} in the name")
    p.add_argument("--time", type=float, nargs="+", default=[0.5], help="time(s) of the output frame(s), 0 < t < 1")
    p.add_argument("--model", default="network", help="name of a weights file in weights/ (without .safetensors)")
    p.add_argument("--weights", type=Path, default=None,
                   help="path of a weights file (.safetensors, or a published network-lf.pytorch); overrides --model")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    precision = p.add_mutually_exclusive_group()
    precision.add_argument("--fp16", action="store_true", help="float16 autocast (CUDA)")
    precision.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    p.add_argument("--flow-scale", "--scale", type=float, default=1.0,
                   help="estimate flow at this fraction of the resolution (e.g. 0.5 for 4K)")
    p.add_argument("--tile", type=tile_value, default="auto",
                   help="process frames larger than TILE x TILE in overlapping tiles (bounded memory); 0 = whole "
                        "frames; auto = whole frames when they fit in the device's free memory, else the largest "
                        "tiles that do")
    p.add_argument("--tile-overlap", type=int, default=128, help="overlap of neighbouring tiles, cross-faded")
    p.add_argument("--alpha", default="flow", choices=["flow", "linear"],
                   help="transparency of interpolated frames: moved with the flow (objects with their own alpha), or "
                        "the two frames' alpha mixed linearly in time (a still matte over moving content)")
    p.add_argument("--ensemble", type=int, default=1, choices=[1, 2, 4],
                   help="average 2 passes (the frames and their mirror image) or 4 (also time-reversed): 2x or 4x "
                        "the time for 0.08-0.12 dB on held-out footage")
    v = p.add_argument_group("video and frame sequences")
    v.add_argument("--video", type=Path, help="input video; --out is a video file (mp4/mkv/mov) or DIR/%%06d.png")
    v.add_argument("--frames", type=Path, help="input folder of frames (sorted by name); --out DIR/%%06d.png")
    v.add_argument("--input-fps", default="25", help="frame rate of --frames input")
    v.add_argument("--factor", type=int, default=None, help="output frames per input frame (default 2)")
    v.add_argument("--fps", default=None, help="output frame rate instead of --factor, e.g. 59.94 or 60000/1001")
    v.add_argument("--slowmo", action="store_true",
                   help="keep the frame rate, play --factor times slower (drops the audio unless --audio-codec "
                        "names an encoder: then the audio is slowed with the picture, its pitch kept)")
    v.add_argument("--scene-threshold", type=float, default=0.12,
                   help="cut detection: mean grey difference (0-1) above which frames are not interpolated; 0 = off")
    v.add_argument("--dedup", type=float, default=0.0, nargs="?", const=0.002,
                   help="drop (near-)repeated input frames and interpolate across them; optional threshold")
    v.add_argument("--fields", action="store_true",
                   help="interlaced --video (DV, broadcast): deinterlace to one frame per field, twice the frame rate "
                        "(25i gives 50 frames/s, every moment the camera took), before --factor / --fps apply "
                        "(--factor 1: no interpolation); default: one frame per frame")
    v.add_argument("--compile", action="store_true",
                   help="torch.compile the network (CUDA): the first pair takes a minute or two, later ones run faster")
    v.add_argument("--eager", action="store_true",
                   help="run the network op by op on CUDA instead of replaying it as CUDA graphs (the default for "
                        "whole frames without --compile or --ensemble); the frames differ by float rounding only")
    v.add_argument("--crf", type=int, default=18,
                   help="constant quality, lower is better, on the encoder's own scale: CRF 0-51 for x264/x265, "
                        "-cq 1-51 for NVENC, CRF 0-63 for VP8/VP9/AV1 (libvpx, libvpx-vp9, libsvtav1, libaom-av1)")
    v.add_argument("--codec", default="auto",
                   help="ffmpeg video encoder, e.g. libx264, libx265, libvpx-vp9, libsvtav1, h264_nvenc (NVIDIA "
                        "GPUs with a hardware encoder), prores_ks (.mov); auto: libx264, or libvpx-vp9 for .webm")
    v.add_argument("--preset", default="medium", choices=PRESETS,
                   help="encoder speed, in x264's names (mapped to SVT-AV1's presets, libvpx/libaom's cpu-used "
                        "and NVENC's p1-p7): the encoder often limits the pipeline; veryfast encodes about 2x "
                        "faster than medium at the same --crf, into larger files")
    v.add_argument("--pix-fmt", default=None,
                   help="output pixel format (default yuv420p, yuv420p10le for 10-bit input, yuv444p for odd "
                        "sizes, or the nearest the encoder takes: ProRes yuv422p10le)")
    v.add_argument("--audio-codec", default="copy",
                   help="the source's audio: copy (unchanged, the default) or an ffmpeg audio encoder to re-encode it "
                        "with, for a container the original does not fit (AAC into .webm: libopus) or to keep it in "
                        "--slowmo; e.g. aac, libopus, flac")
    v.add_argument("--audio-bitrate", default="",
                   help="bitrate of re-encoded audio (--audio-codec), e.g. 192k; default: the encoder's own "
                        "(aac: 128k)")
    v.add_argument("--segment-seconds", type=float, default=10.0, help="resume granularity of video output")
    return p


def tile_value(text: str) -> Union[int, str]:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use auto, 0 (whole frames) or a tile size in pixels")
    return value


def resolve_tile(requested: Union[int, str], height: int, width: int, device: torch.device) -> int:
    """The tile size to use: ``requested`` itself, or for "auto" what fits in free memory (said on stderr)."""
    from model.inference import available_memory, fit_tile, needed_memory

    if requested != "auto":
        return int(requested)
    tile = fit_tile(height, width, device)
    if tile:
        print(f"note: {width}x{height} frames need about {needed_memory(height, width, device) / 2**30:.1f} GiB "
              f"on {device}, {available_memory(device) / 2**30:.1f} GiB is free: processing in {tile}-pixel tiles "
              f"(--tile 0 forces whole frames)", file=sys.stderr)
    return tile


def run_sequence(args, autocast: Optional[torch.dtype]) -> int:
    """--video or --frames: stream through the network and report one summary line."""
    from model.inference import interpolate_integer, interpolate_integer_alpha
    from model.network import Network
    from pipeline.schedule import parse_rate
    from pipeline.video import VideoOptions, interpolate_frames, interpolate_video, mix_alpha_linearly

    from media.video import audio_args, default_codec, encoder_pix_fmts, encoder_quality_args

    codec = default_codec(Path(args.out)) if args.codec == "auto" else args.codec
    options = VideoOptions(factor=args.factor, fps=parse_rate(args.fps) if args.fps else None, slowmo=args.slowmo,
                           scene_threshold=args.scene_threshold, dedup_threshold=args.dedup or 0.0,
                           crf=args.crf, codec=codec, preset=args.preset, pix_fmt=args.pix_fmt,
                           segment_seconds=args.segment_seconds, field_rate=args.fields,
                           audio_codec=args.audio_codec, audio_bitrate=args.audio_bitrate)
    audio_args(args.audio_codec, 1, args.audio_bitrate)  # a bad --audio-bitrate is refused before any work
    if "%" not in str(args.out):  # video output: an encoder ffmpeg lacks is named now, not after the first segment
        encoder_pix_fmts(codec)
        if encoder_quality_args(codec, args.crf, args.preset) is None:
            print(f"note: --crf and --preset do not apply to {codec}: it encodes with its own settings",
                  file=sys.stderr)
    weights = weights_path(args.model, args.weights)
    from model.ensemble import with_ensemble

    net = with_ensemble(load_network(Path(weights), resolve_device(args.device)), args.ensemble)
    if args.compile:
        from model.runtime import compile_network

        net = compile_network(net)
    device = next(net.parameters()).device
    tiles = {}  # frame shape -> tile size, decided once per size
    # whole colour frames of one size replay the network as CUDA graphs (flow per pair, synthesis per t): its few
    # hundred kernel launches otherwise compete with the decoder and encoder for the CPU
    use_graphs = device.type == "cuda" and isinstance(net, Network) and not args.eager
    graphs = {}  # frame shape -> GraphedPairs, or None where capturing failed (then eager)

    def step(one, two, times):
        if one.shape not in tiles:
            tiles[one.shape] = resolve_tile(args.tile, one.shape[0], one.shape[1], device)
        if one.shape[2] == 4:  # alpha (--frames, or transparent --video to images): moved with the flow, or
            # mixed linearly in time where asked, with tiles, --ensemble and --compile (colour through this step)
            if args.alpha == "linear" or tiles[one.shape] or not isinstance(net, Network):
                return mix_alpha_linearly(step, one, two, times)
            return interpolate_integer_alpha(net, one, two, times, autocast, args.flow_scale)
        if use_graphs and not tiles[one.shape] and one.shape not in graphs:
            from model.runtime import graphed_pairs

            graphs[one.shape] = graphed_pairs(net, (1, 3, *one.shape[:2]), autocast, args.flow_scale)
        return interpolate_integer(net, one, two, times, autocast, args.flow_scale, tiles[one.shape],
                                   args.tile_overlap, graphed=graphs.get(one.shape))

    step.takes_alpha = True  # the pipeline passes frames with alpha straight here

    if args.video is not None:
        # whatever changes the frames is part of the job's identity: a resumed job never mixes two settings
        model_id = f"{weights} ensemble={args.ensemble} flow_scale={args.flow_scale} autocast={autocast}"
        stats = interpolate_video(args.video, args.out, step, options, weights_id=model_id)
    else:
        stats = interpolate_frames(args.frames, str(args.out), parse_rate(args.input_fps), step, options)
    problem = stats.pop("input_problem", None)
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    if problem:
        print(f"warning: {args.video}: ffmpeg reported '{problem}' while reading it; the output covers the "
              f"{stats.get('frames_in')} frames it could read", file=sys.stderr)
    return 0


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        # under torchrun each process takes its own GPU
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"--device {name!r} is not a device: use auto, cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda asked for, but no CUDA GPU is available: use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise ValueError(f"--device {name!r}: use auto, cpu, cuda or cuda:N")
    return device


@functools.lru_cache(maxsize=4)
def load_network(weights: Path, device: torch.device):
    """The network for ``weights`` on ``device`` (cached: one load per file and device)."""
    from model.weights import load_any

    return load_any(weights, device)


def weights_path(model: str, weights: Optional[Path]) -> Path:
    if weights is not None:
        return weights
    return ROOT / "weights" / f"{model}.safetensors"


def output_paths(out: Path, times: Sequence[float]) -> List[Path]:
    name = str(out)
    if len(times) == 1 and "{" not in name:
        return [out]
    if "{i}" not in name and "{t}" not in name:
        name = str(out.with_name(f"{out.stem}-{{i}}{out.suffix}"))
    paths = [Path(name.format(i=i, t=f"{t:.3f}")) for i, t in enumerate(times)]
    if len(set(paths)) != len(paths):
        raise ValueError(f"--out {out} gives the same file name for several times: use {{i}} or {{t}}")
    return paths


def interpolate_files(one: Path, two: Path, out: Path, times: Sequence[float] = (0.5,),
                      weights: Path = DEFAULT_WEIGHTS, device: str = "auto",
                      autocast_dtype: Optional[torch.dtype] = None, flow_scale: float = 1.0,
                      tile: Union[int, str] = 0, overlap: int = 128, ensemble: int = 1,
                      alpha: str = "flow") -> List[Path]:
    """Read two images, interpolate, write one image per t. Returns the written paths.

    ``ensemble`` 2 or 4 averages that many passes (mirrored, and time-reversed): slower, a little better.
    ``alpha`` "flow" moves transparency with the network's flow, "linear" mixes the two frames' alpha in time (also
    what tiles and ``ensemble`` do).
    """
    import numpy as np

    from media.images import check_writable, read_image, write_image
    from model.ensemble import with_ensemble
    from model.inference import interpolate
    from model.network import Network

    for t in times:
        if not 0.0 < t < 1.0:
            raise ValueError(f"--time {t}: times must lie strictly between 0 and 1")
    if alpha not in ("flow", "linear"):
        raise ValueError(f"--alpha {alpha!r}: use flow or linear")
    if not 0.0 < flow_scale <= 1.0:
        raise ValueError(f"--flow-scale {flow_scale}: use a value in (0, 1]")
    paths = output_paths(out, times)
    for path in paths:
        check_writable(path)
    rgb_one, alpha_one, depth_one = read_image(one)
    rgb_two, alpha_two, depth_two = read_image(two)
    if rgb_one.shape != rgb_two.shape:
        raise ValueError(f"frames differ in size: {one} is {rgb_one.shape[1]}x{rgb_one.shape[0]}, "
                         f"{two} is {rgb_two.shape[1]}x{rgb_two.shape[0]}")
    net = with_ensemble(load_network(Path(weights), resolve_device(device)), ensemble)
    device_used = next(net.parameters()).device
    tile = resolve_tile(tile, rgb_one.shape[0], rgb_one.shape[1], device_used)
    depth = max(depth_one, depth_two)
    if alpha_one is None and alpha_two is None:
        for path, frame in zip(paths, interpolate(net, rgb_one, rgb_two, times, autocast_dtype, flow_scale, tile,
                                                  overlap)):
            write_image(path, frame, None, depth)
        return paths
    opaque = np.ones(rgb_one.shape[:2], np.float32)
    alpha_one = alpha_one if alpha_one is not None else opaque
    alpha_two = alpha_two if alpha_two is not None else opaque
    if alpha == "linear" or tile or not isinstance(net, Network):  # also tiles and --ensemble: mixed in time
        frames = interpolate(net, rgb_one, rgb_two, times, autocast_dtype, flow_scale, tile, overlap)
        alphas = [(1.0 - t) * alpha_one + t * alpha_two for t in times]
    else:  # alpha moves with the network's flow: a moving transparent object keeps one outline
        from model.inference import interpolate_with_alpha

        def tensor(x: np.ndarray) -> torch.Tensor:
            x = x if x.ndim == 3 else x[:, :, None]
            return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(2, 0, 1)[None].to(device_used)

        outs = interpolate_with_alpha(net, tensor(rgb_one), tensor(rgb_two), tensor(alpha_one), tensor(alpha_two),
                                      times, autocast_dtype, flow_scale)
        frames = [c[0].permute(1, 2, 0).cpu().numpy() for c, _ in outs]
        alphas = [a[0, 0].cpu().numpy() for _, a in outs]
    for path, frame, frame_alpha in zip(paths, frames, alphas):
        write_image(path, frame, frame_alpha, depth)
    return paths


def estimate(tenOne: torch.Tensor, tenTwo: torch.Tensor, fltTimes: Sequence[float] = (0.5,)) -> List[torch.Tensor]:
    """The published API: 3 x H x W float tensors in [0, 1], BGR; returns 3 x H x W CPU tensors, BGR."""
    from model.inference import interpolate

    for name, ten in (("tenOne", tenOne), ("tenTwo", tenTwo)):
        if not isinstance(ten, torch.Tensor) or ten.dim() != 3 or ten.shape[0] != 3:
            raise ValueError(f"{name} must be a 3 x H x W tensor (BGR, values in [0, 1])")
    net = load_network(DEFAULT_WEIGHTS, resolve_device("auto"))
    outs = interpolate(net, tenOne.flip(0), tenTwo.flip(0), list(fltTimes))
    return [o.flip(0).cpu() for o in outs]


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from media.images import ImageError
    from media.video import VideoError
    from model.weights import WeightsError

    sequence = args.video is not None or args.frames is not None
    if sequence and (args.out is None or (args.video is not None and args.frames is not None)):
        parser.error("use --video IN or --frames DIR, with --out")
    if not sequence and (args.one is None or args.two is None or args.out is None):
        parser.error("--one, --two and --out are required (or --video/--frames with --out)")
    if args.fields and args.video is None:
        parser.error("--fields reads interlaced video one frame per field: use it with --video")
    autocast = torch.float16 if args.fp16 else torch.bfloat16 if args.bf16 else None
    try:
        if sequence:
            return run_sequence(args, autocast)
        paths = interpolate_files(args.one, args.two, args.out, args.time,
                                  weights_path(args.model, args.weights), args.device, autocast, args.flow_scale,
                                  args.tile, args.tile_overlap, args.ensemble, args.alpha)
    except (VideoError, ImageError, WeightsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted" + (": run the same command again to resume" if sequence else ""), file=sys.stderr)
        return 130
    for path in paths:
        print(f"wrote {path}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
