"""Experiment (written in session 7 without a GPU, measured in session 8 on an H200: correct, but 1.5-5x slower
than softsplat's forward; docs/journal/softsplat-history.md): a soft-mode forward in which
a block owns a tile of targets in shared memory and scans the sources that can land there, instead of reducing
every source into global memory with atomics (docs/journal/softsplat-history.md, "target tiles that scan
their sources").

    python -m bench.variants.scan_forward [--repeats 30]

on a GPU: for the six shapes of bench/bench_softsplat.py, checks the output, normaliser and Z_max against
softsplat's forward (soft mode, float32 and bfloat16) and times both, alternating, in one process.

Kernels: ``scan_boxes`` gives every 32 x 32 source tile the bounding box of its sources' positive-weight
corners; ``scan_forward`` (one block per target tile, ``TILE_W`` x ``TILE_H``) lists the source tiles whose box
meets its tile, computes Z_max of its targets with shared-memory atomics over those sources, then the weighted
sums of a slice of channels and the normaliser, and stores every output pixel once, normalised (plus Z_max and
the normaliser, which softsplat's backward reads). No global atomics, no fills. Source tiles are re-read by
every target tile they reach, so chaotic large flows cost more; past ``list_max`` candidates a block scans every
source tile (correct, slow). The same definitions as softsplat's kernels (positive-weight corners only), so the
results should match up to the order of float additions.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Optional, Tuple

import torch


import softsplat

TILE_W = 128
SOURCE_TILE = 32
LIST_MAX = 2048
MAX_SLICE = 8

_SCAN_SOURCE = r"""
#define SOURCE_TILE 32

__device__ __forceinline__ bool corner_of(const Corners& c, int k, int& cx, int& cy) {
    // target k of a footprint, when it lies inside the frame and has a positive weight
    if (c.target[k] < 0 || !(c.weight[k] > 0)) return false;
    cx = c.x0 + (k & 1);
    cy = c.y0 + (k >> 1);
    return true;
}

struct Window {  // a block's target tile: origin and size (clipped to the frame)
    int x0, y0, w, h;
};

__device__ __forceinline__ bool meets(const int4 b, const Window& t) {
    return b.x <= t.x0 + t.w - 1 && b.z >= t.x0 && b.y <= t.y0 + t.h - 1 && b.w >= t.y0;
}

// The source tile candidate j names, or -1 when (after a list overflow) its box misses the target tile.
__device__ __forceinline__ int candidate(int j, bool overflow, const int* list, const int4* boxes, const Window& t) {
    const int st = overflow ? j : list[j];
    return overflow && !meets(boxes[st], t) ? -1 : st;
}

// Pixel i of source tile st as its offset y * W + x in the image, or -1 outside the frame.
__device__ __forceinline__ long long tile_pixel(int st, int i, int tiles_x, int H, int W) {
    const int sy = st / tiles_x;
    const int x = (st - sy * tiles_x) * SOURCE_TILE + (i % SOURCE_TILE);
    const int y = sy * SOURCE_TILE + (i / SOURCE_TILE);
    return x < W && y < H ? (long long)y * W + x : -1;
}

// Corner k's index in the target tile's shared arrays, or -1 when it is not a positive-weight target there.
__device__ __forceinline__ int local_corner(const Corners& c, int k, const Window& t) {
    int cx, cy;
    if (!corner_of(c, k, cx, cy)) return -1;
    cx -= t.x0;
    cy -= t.y0;
    return cx >= 0 && cx < t.w && cy >= 0 && cy < t.h ? cy * TILE_W + cx : -1;
}

extern "C" __global__ void scan_boxes(const int H, const int W, const int tiles_x, const int tiles_y,
                                      const scalar_t* __restrict__ flow, int4* __restrict__ boxes) {
    __shared__ int box[4];
    const int per_image = tiles_x * tiles_y;
    const int n = blockIdx.x / per_image;
    const int r = blockIdx.x - n * per_image;
    if (threadIdx.x == 0) {
        box[0] = 2147483647; box[1] = 2147483647; box[2] = -2147483647 - 1; box[3] = -2147483647 - 1;
    }
    __syncthreads();
    int x0 = 2147483647, y0 = 2147483647, x1 = -2147483647 - 1, y1 = -2147483647 - 1;
    for (int i = threadIdx.x; i < SOURCE_TILE * SOURCE_TILE; i += blockDim.x) {
        const long long s = tile_pixel(r, i, tiles_x, H, W);
        Corners c;
        if (s < 0 || !corners_of((long long)n * H * W + s, H, W, flow, c)) continue;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int cx, cy;
            if (!corner_of(c, k, cx, cy)) continue;
            x0 = min(x0, cx); y0 = min(y0, cy); x1 = max(x1, cx); y1 = max(y1, cy);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        x0 = min(x0, __shfl_down_sync(0xffffffffu, x0, offset));
        y0 = min(y0, __shfl_down_sync(0xffffffffu, y0, offset));
        x1 = max(x1, __shfl_down_sync(0xffffffffu, x1, offset));
        y1 = max(y1, __shfl_down_sync(0xffffffffu, y1, offset));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicMin(&box[0], x0); atomicMin(&box[1], y0); atomicMax(&box[2], x1); atomicMax(&box[3], y1);
    }
    __syncthreads();
    if (threadIdx.x == 0) boxes[blockIdx.x] = make_int4(box[0], box[1], box[2], box[3]);  // empty: x0 > x1
}

// One block per target tile (blockIdx.x) of image blockIdx.y. Shared memory: Z_max and the normaliser of the
// tile's targets, `slice` channel planes, the candidate list.
extern "C" __global__ void __launch_bounds__(1024, 1) scan_forward(const int H, const int W, const int C,
                                        const int tiles_x, const int tiles_y,
                                        const int target_tiles_x, const int tile_h, const int slice,
                                        const int list_max,
                                        const io_t* __restrict__ input, const scalar_t* __restrict__ flow,
                                        const scalar_t* __restrict__ metric, const int4* __restrict__ boxes,
                                        io_t* __restrict__ out, scalar_t* __restrict__ den_out,
                                        scalar_t* __restrict__ zmax_out) {
    extern __shared__ float smem[];
    __shared__ int count;
    const int T = TILE_W * tile_h;
    float* zm = smem;
    float* dn = zm + T;
    float* acc = dn + T;
    int* list = (int*)(acc + (long long)slice * T);
    const int n = blockIdx.y;
    Window t;
    t.x0 = (blockIdx.x % target_tiles_x) * TILE_W;
    t.y0 = (blockIdx.x / target_tiles_x) * tile_h;
    t.w = min(TILE_W, W - t.x0);
    t.h = min(tile_h, H - t.y0);
    const long long hw = (long long)H * W;
    const int per_image = tiles_x * tiles_y;
    const int4* image_boxes = boxes + (long long)n * per_image;
    // -inf spelled as its bits: NVRTC compiles without the math headers that define INFINITY
    for (int i = threadIdx.x; i < T; i += blockDim.x) { zm[i] = __int_as_float(0xff800000); dn[i] = 0.0f; }
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < per_image; i += blockDim.x) {
        if (meets(image_boxes[i], t)) {
            const int k = atomicAdd(&count, 1);
            if (k < list_max) list[k] = i;
        }
    }
    __syncthreads();
    const bool overflow = count > list_max;
    const int candidates = overflow ? per_image : count;
    // phase 0: Z_max of the tile's targets; phase 1, 2, ...: the weighted sums of one slice of channels each (and,
    // with the first, the normaliser), then that slice of the output
    const int slices = (C + slice - 1) / slice;
    for (int phase = 0; phase <= slices; ++phase) {
        const int c0 = (phase - 1) * slice;
        const int cs = phase > 0 ? min(slice, C - c0) : 0;
        for (int i = threadIdx.x; i < cs * T; i += blockDim.x) acc[i] = 0.0f;
        __syncthreads();
        for (int j = 0; j < candidates; ++j) {
            const int st = candidate(j, overflow, list, image_boxes, t);
            if (st < 0) continue;
            for (int i = threadIdx.x; i < SOURCE_TILE * SOURCE_TILE; i += blockDim.x) {
                const long long s = tile_pixel(st, i, tiles_x, H, W);
                Corners c;
                if (s < 0 || !corners_of(n * hw + s, H, W, flow, c)) continue;
                const float m = metric[n * hw + s];
                if (phase == 0) {
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        const int local = local_corner(c, k, t);
                        if (local >= 0 && m > zm[local]) atomic_max_scalar(zm + local, m);
                    }
                    continue;
                }
                bool loaded = false;
                float val[MAX_SLICE];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const int local = local_corner(c, k, t);
                    if (local < 0) continue;
                    if (!loaded) {
                        const io_t* in = input + ((long long)n * C + c0) * hw + s;
#pragma unroll
                        for (int ch = 0; ch < MAX_SLICE; ++ch) val[ch] = ch < cs ? (float)io_load(in[ch * hw]) : 0.0f;
                        loaded = true;
                    }
                    // as softsplat's factor_of: exp of the metric shifted by the target's Z_max, clamped at 0
                    const float z = zm[local];
                    const float e = isfinite(z) ? c.weight[k] * expf(fminf(m - z, 0.0f)) : 0.0f;
                    if (c0 == 0) atomicAdd(dn + local, e);
#pragma unroll
                    for (int ch = 0; ch < MAX_SLICE; ++ch) {
                        if (ch < cs) atomicAdd(acc + (long long)ch * T + local, e * val[ch]);
                    }
                }
            }
        }
        __syncthreads();
        if (phase == 0) continue;
        for (int i = threadIdx.x; i < T; i += blockDim.x) {
            const int lx = i % TILE_W;
            const int ly = i / TILE_W;
            if (lx >= t.w || ly >= t.h) continue;
            float d = dn[i];
            bool blocked = false;
#if EPS_MODE == 0
            d = d + 1e-7f;
#elif EPS_MODE == 1
            if (d == 0) { d = 1; blocked = true; }
#else
            if (d < 1e-7f) { d = 1e-7f; blocked = true; }
#endif
            const float inv = 1.0f / d;
            const long long p = (long long)(t.y0 + ly) * W + (t.x0 + lx);
            io_t* o = out + ((long long)n * C + c0) * hw + p;
            for (int ch = 0; ch < cs; ++ch) o[ch * hw] = io_store(acc[(long long)ch * T + i] * inv);
            if (c0 == 0) {
                if (den_out != nullptr) den_out[n * hw + p] = blocked ? -d : d;
                zmax_out[n * hw + p] = zm[i];
            }
        }
        __syncthreads();
    }
}
"""


@functools.lru_cache(maxsize=None)
def _scan_module(device_index: int, io_dtype: Optional[torch.dtype], eps_mode: str):
    """The scan kernels (float32 accumulation, soft mode) on top of softsplat's helpers, for one device."""
    cupy = softsplat._cupy()
    defines = (
        "#define SCALAR float\n#define KIND 3\n"
        f"#define EPS_MODE {softsplat._EPS_MODES.index(eps_mode)}\n#define VEC4 1\n"
        f"#define IO_KIND {softsplat._IO_KINDS.get(io_dtype, 0)}\n"
        f"#define TILE_W {TILE_W}\n#define MAX_SLICE {MAX_SLICE}\n"
    )
    with cupy.cuda.Device(device_index):
        module = cupy.RawModule(code=defines + softsplat._CUDA_SOURCE + _SCAN_SOURCE, options=("-std=c++17",))
        kernels = {name: module.get_function(name) for name in ("scan_boxes", "scan_forward")}
        optin = int(cupy.cuda.Device(device_index).attributes.get("MaxSharedMemoryPerBlockOptin", 227 * 1024))
        kernels["scan_forward"].max_dynamic_shared_size_bytes = optin - 1024  # the static `count` and slack
    return kernels, optin - 1024


def _tiling(channels: int, smem_limit: int) -> Tuple[int, int]:
    """Target tile height and channels per pass: 128 x 64 targets for 3 channels, 128 x 32 and up to 8
    channels per pass otherwise, within the shared memory the device allows."""
    tile_h, slice_ = (64, channels) if channels <= 3 else (32, min(channels, MAX_SLICE))
    while (2 + slice_) * 4 * TILE_W * tile_h + 4 * LIST_MAX > smem_limit and slice_ > 1:
        slice_ -= 1
    return tile_h, slice_


def scan_forward(x: torch.Tensor, flow: torch.Tensor, metric: torch.Tensor, eps_mode: str = "addeps",
                 keep: bool = True) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Soft-mode forward: output, guarded normaliser (empty without ``keep``) and Z_max, as softsplat's
    ``_cuda_forward_impl(x, flow, metric, "soft", eps_mode, keep)`` returns them."""
    n, c, h, w = x.shape
    dev = x.device.index
    io_dtype = x.dtype if x.dtype in softsplat._IO_KINDS else None
    xs = x.contiguous() if io_dtype is not None else softsplat._as(x, torch.float32)
    fl = softsplat._as(flow, torch.float32)
    m = softsplat._as(metric, torch.float32)
    kernels, smem_limit = _scan_module(dev, io_dtype, eps_mode)
    tiles_x, tiles_y = -(-w // SOURCE_TILE), -(-h // SOURCE_TILE)
    boxes = torch.empty((n * tiles_x * tiles_y, 4), device=x.device, dtype=torch.int32)
    softsplat._launch(kernels["scan_boxes"], n * tiles_x * tiles_y * 256, "iiiiPP",
                      (h, w, tiles_x, tiles_y, softsplat._ptr(fl), softsplat._ptr(boxes)), dev, threads=256)
    tile_h, slice_ = _tiling(c, smem_limit)
    target_tiles_x, target_tiles_y = -(-w // TILE_W), -(-h // tile_h)
    out = torch.empty((n, c, h, w), device=x.device, dtype=xs.dtype)
    den = torch.empty((n, 1, h, w) if keep else (0,), device=x.device, dtype=torch.float32)
    zmax = torch.empty((n, 1, h, w), device=x.device, dtype=torch.float32)
    smem = (2 + slice_) * 4 * TILE_W * tile_h + 4 * LIST_MAX
    softsplat._launch(kernels["scan_forward"], target_tiles_x * target_tiles_y * 1024, "iiiiiiiiiPPPPPPP",
                      (h, w, c, tiles_x, tiles_y, target_tiles_x, tile_h, slice_, LIST_MAX, softsplat._ptr(xs),
                       softsplat._ptr(fl), softsplat._ptr(m), softsplat._ptr(boxes), softsplat._ptr(out),
                       softsplat._ptr(den) if keep else 0, softsplat._ptr(zmax)),
                      dev, threads=1024, shared_mem=smem, grid_y=n)
    return softsplat._as(out, x.dtype), den, zmax


def _time_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args(argv)
    if not torch.cuda.is_available() or not softsplat.cuda_available():
        print("error: needs a CUDA GPU and CuPy", file=sys.stderr)
        return 2
    from bench.bench_softsplat import PUBLISHED, SHAPES

    device = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}")
    for dtype in (torch.float32, torch.bfloat16):
        for shape in SHAPES:
            n, c, h, w = shape
            gen = torch.Generator(device=device).manual_seed(0)
            x = torch.rand(shape, device=device, generator=gen).to(dtype)
            flow = torch.randn(n, 2, h, w, device=device, generator=gen) * 8
            metric = torch.randn(n, 1, h, w, device=device, generator=gen)
            ref = softsplat._cuda_forward_impl(x, flow, metric, "soft", "addeps", keep=True)
            new = scan_forward(x, flow, metric, "addeps", keep=True)
            diffs = [float((a.float() - b.float()).abs().nan_to_num(0).max()) for a, b in zip(ref, new)]
            zmax_same = bool(torch.equal(ref[2], new[2]))
            times = []
            for _ in range(2):  # alternating, two rounds
                times.append(_time_ms(lambda: softsplat._cuda_forward_impl(x, flow, metric, "soft", "addeps",
                                                                           keep=False), args.repeats))
                times.append(_time_ms(lambda: scan_forward(x, flow, metric, "addeps", keep=False), args.repeats))
            target = PUBLISHED[shape][0] / 4
            print(f"{str(dtype):15s} {'x'.join(map(str, shape)):16s} max diff out/den/zmax "
                  f"{diffs[0]:.2e}/{diffs[1]:.2e}/{diffs[2]:.2e} zmax equal {zmax_same}  forward ms: softsplat "
                  f"{times[0]:.3f}/{times[2]:.3f}  scan {times[1]:.3f}/{times[3]:.3f}  (4x target {target:.3f})",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
