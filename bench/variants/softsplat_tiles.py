"""A tile-binned forward for softsplat (session 3), kept to time side by side with softsplat.py.

Sources are binned by the 32x8 target tile(s) their footprint touches; one block per tile then
accumulates Z_max, the weighted sums and the normaliser in shared memory and stores every output
pixel once. Measured on an H200 (docs/softsplat.md): faster than softsplat.py at 33-65 channels,
slower at 3 and 97, so not adopted. Only the forward differs: validation, the PyTorch path, the
CUDA helpers and the backward are softsplat.py's own.

    python bench/bench_softsplat.py --no-torch --module bench/variants/softsplat_tiles.py
"""

from __future__ import annotations

import functools
from typing import Optional, Tuple

import torch

import softsplat as base
from softsplat import _i32, _i64, _launch, _ptr, _splat_torch  # _splat_torch is also what the benchmark times

_TILE_W, _TILE_H = 32, 8  # target tile of one block, one thread per pixel

# appended to softsplat's CUDA source, whose helpers (scalar_t, Corners, atomic_max_scalar, exp_scalar)
# and KIND/EPS_MODE switches it uses
_TILE_SOURCE = r"""
// -inf of the argument's type (NVRTC has no INFINITY macro)
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }

// The normaliser with its guard against empty targets (-addeps, -zeroeps, -clipeps);
// blocked: the guard replaced it, so no gradient flows into it.
__device__ __forceinline__ scalar_t guarded(scalar_t d, bool& blocked) {
    blocked = false;
#if EPS_MODE == 0
    return d + (scalar_t)1e-7;
#elif EPS_MODE == 1
    if (d == 0) { blocked = true; return (scalar_t)1; }
    return d;
#else
    if (d < (scalar_t)1e-7) { blocked = true; return (scalar_t)1e-7; }
    return d;
#endif
}

// ---- forward: sources binned by target tile, each tile accumulated in shared memory ----
// A tile is TW x TH target pixels of one image. bin_count and bin_fill list, per tile, the
// sources whose bilinear footprint touches it (1, 2 or 4 tiles per source); splat_tiles then
// runs one block per tile: Z_max, the weighted sums and the normaliser live in shared memory,
// and every output pixel is written once with a plain store. No global atomics on the data,
// no zero-filled accumulator, no separate Z_max or normalise pass.

// Source pixel s of image n (32-bit indices: the forward takes N*H*W < 2**31): the top-left
// corner (x0, y0) of its bilinear footprint and the fractions; false if no corner can land in
// the frame (non-finite flow included), which also keeps the int casts in range.
__device__ __forceinline__ bool footprint(int n, int s, int H, int W, const scalar_t* flow,
                                          int& x0, int& y0, scalar_t& fx, scalar_t& fy) {
    const long long hw = (long long)H * W;
    const int y = s / W;
    const int x = s - y * W;
    const scalar_t gx = (scalar_t)x + flow[2 * n * hw + s];
    const scalar_t gy = (scalar_t)y + flow[(2 * n + 1) * hw + s];
    if (!(gx > (scalar_t)-1 && gx < (scalar_t)W && gy > (scalar_t)-1 && gy < (scalar_t)H)) return false;
    const scalar_t ix = floor(gx);
    const scalar_t iy = floor(gy);
    x0 = (int)ix;
    y0 = (int)iy;
    fx = gx - ix;
    fy = gy - iy;
    return true;
}

// The tiles a source's corners fall in (deduplicated, -1 for none).
__device__ __forceinline__ void tiles_of(int src, int H, int W, int tiles_x, int tiles_per_img,
                                         const scalar_t* flow, int key[4]) {
    const int hw = H * W;
    const int n = src / hw;
    int x0, y0;
    scalar_t fx, fy;
    if (!footprint(n, src - n * hw, H, W, flow, x0, y0, fx, fy)) return;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int cx = x0 + (k & 1);
        const int cy = y0 + (k >> 1);
        if (cx < 0 || cx >= W || cy < 0 || cy >= H) continue;
        const int t = n * tiles_per_img + (cy / TH) * tiles_x + cx / TW;
        bool seen = false;
#pragma unroll
        for (int j = 0; j < k; ++j) seen |= key[j] == t;
        if (!seen) key[k] = t;
    }
}

// A listed source's corners inside the tile at (tx0, ty0): slot (pixel within the tile) and
// bilinear weight; slot -1 for corners outside the tile or the frame or of zero weight.
__device__ __forceinline__ void tile_corners(int n, int s, int H, int W, int tx0, int ty0, const scalar_t* flow,
                                             int slot[4], scalar_t weight[4]) {
    int x0, y0;
    scalar_t fx, fy;
    slot[0] = slot[1] = slot[2] = slot[3] = -1;
    if (!footprint(n, s, H, W, flow, x0, y0, fx, fy)) return;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int dx = k & 1;
        const int dy = k >> 1;
        weight[k] = (dx ? fx : (scalar_t)1 - fx) * (dy ? fy : (scalar_t)1 - fy);
        const int cx = x0 + dx;
        const int cy = y0 + dy;
        const int lx = cx - tx0;
        const int ly = cy - ty0;
        if (cx < W && cy < H && lx >= 0 && lx < TW && ly >= 0 && ly < TH && weight[k] > 0) slot[k] = ly * TW + lx;
    }
}

// counts[t] += number of sources touching tile t (lanes of a warp that share a tile add once)
extern "C" __global__ void bin_count(const long long n_src, const int H, const int W, const int tiles_x,
                                     const int tiles_per_img, const scalar_t* __restrict__ flow,
                                     int* __restrict__ counts) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int key[4] = {-1, -1, -1, -1};
    if (src < n_src) tiles_of((int)src, H, W, tiles_x, tiles_per_img, flow, key);
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned group = __match_any_sync(0xffffffffu, key[k]);
        if (key[k] >= 0 && lane == __ffs(group) - 1) atomicAdd(counts + key[k], __popc(group));
    }
}

// One block: offsets = exclusive prefix sum of counts (n + 1 entries); counts reset to 0 to
// serve as bin_fill's cursors.
extern "C" __global__ void bin_scan(const int n, int* __restrict__ counts, int* __restrict__ offsets) {
    __shared__ int partial[1024];
    const int per = (n + blockDim.x - 1) / blockDim.x;
    const int begin = min(n, (int)threadIdx.x * per);
    const int end = min(n, begin + per);
    int sum = 0;
    for (int i = begin; i < end; ++i) sum += counts[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int step = 1; step < blockDim.x; step <<= 1) {  // Hillis-Steele inclusive scan
        const int v = threadIdx.x >= step ? partial[threadIdx.x - step] : 0;
        __syncthreads();
        partial[threadIdx.x] += v;
        __syncthreads();
    }
    int run = partial[threadIdx.x] - sum;
    for (int i = begin; i < end; ++i) {
        offsets[i] = run;
        run += counts[i];
        counts[i] = 0;
    }
    if (threadIdx.x == blockDim.x - 1) offsets[n] = partial[threadIdx.x];
}

// list[offsets[t] ...] = the sources touching tile t (a warp's lanes that share a tile take
// consecutive slots, so splat_tiles reads their inputs coalesced)
extern "C" __global__ void bin_fill(const long long n_src, const int H, const int W, const int tiles_x,
                                    const int tiles_per_img, const scalar_t* __restrict__ flow,
                                    const int* __restrict__ offsets, int* __restrict__ cursors,
                                    int* __restrict__ list) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int key[4] = {-1, -1, -1, -1};
    if (src < n_src) tiles_of((int)src, H, W, tiles_x, tiles_per_img, flow, key);
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned group = __match_any_sync(0xffffffffu, key[k]);
        const int leader = __ffs(group) - 1;
        int base = 0;
        if (key[k] >= 0 && lane == leader) base = atomicAdd(cursors + key[k], __popc(group));
        base = __shfl_sync(0xffffffffu, base, leader);
        if (key[k] >= 0) list[offsets[key[k]] + base + __popc(group & ((1u << lane) - 1u))] = (int)src;
    }
}

// One block of TW * TH threads per tile. Writes out (N x C x H x W, normalised), den (the
// guarded normaliser, negated where the guard blocks its gradient) and zmax for the backward.
// Channels go in passes of `chunk` through dynamic shared memory (chunk * TW * TH values).
extern "C" __global__ void splat_tiles(const int C, const int H, const int W, const int tiles_x,
                                       const int tiles_per_img, const int chunk,
                                       const scalar_t* __restrict__ input,
                                       const scalar_t* __restrict__ flow,
                                       const scalar_t* __restrict__ metric,
                                       const int* __restrict__ offsets,
                                       const int* __restrict__ list,
                                       scalar_t* __restrict__ out,
                                       scalar_t* __restrict__ den,
                                       scalar_t* __restrict__ zmax) {
    extern __shared__ unsigned char smem_raw[];
    scalar_t* acc = (scalar_t*)smem_raw;
    __shared__ scalar_t s_den[TW * TH];
    __shared__ scalar_t s_z[TW * TH];
    const int tile = blockIdx.x;
    const int n = tile / tiles_per_img;
    const int r = tile - n * tiles_per_img;
    const int ty0 = (r / tiles_x) * TH;
    const int tx0 = (r - (r / tiles_x) * tiles_x) * TW;
    const int p = threadIdx.x;
    const long long hw = (long long)H * W;
    const int begin = offsets[tile];
    const int end = offsets[tile + 1];
    s_den[p] = 0;
    s_z[p] = neg_inf((scalar_t)0);
    __syncthreads();
#if KIND == KIND_SOFT
    for (int i = begin + p; i < end; i += TW * TH) {
        const int s = list[i] - n * (int)hw;
        int slot[4];
        scalar_t weight[4];
        tile_corners(n, s, H, W, tx0, ty0, flow, slot, weight);
        const scalar_t m = metric[n * hw + s];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (slot[k] >= 0 && m > s_z[slot[k]]) atomic_max_scalar(s_z + slot[k], m);
        }
    }
    __syncthreads();
#endif
    const int py = ty0 + p / TW;
    const int px = tx0 + p % TW;
    const bool inside = py < H && px < W;
    const long long dst = (long long)py * W + px;
    for (int c0 = 0; c0 < C; c0 += chunk) {
        const int cc = min(chunk, C - c0);
        for (int i = p; i < cc * TW * TH; i += TW * TH) acc[i] = 0;
        __syncthreads();
        for (int i = begin + p; i < end; i += TW * TH) {
            const int s = list[i] - n * (int)hw;
            int slot[4];
            scalar_t e[4];
            tile_corners(n, s, H, W, tx0, ty0, flow, slot, e);
#if KIND == KIND_LINEAR || KIND == KIND_SOFT
            const scalar_t m = metric[n * hw + s];
#endif
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                if (slot[k] < 0) continue;
#if KIND == KIND_LINEAR
                e[k] *= m;
#elif KIND == KIND_SOFT
                e[k] *= exp_scalar(fmin(m - s_z[slot[k]], (scalar_t)0));
#endif
#if KIND != KIND_SUM
                if (c0 == 0) atomicAdd(s_den + slot[k], e[k]);
#endif
            }
            const scalar_t* in = input + ((long long)n * C + c0) * hw + s;
            for (int ch = 0; ch < cc; ++ch) {
                const scalar_t v = in[(long long)ch * hw];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    if (slot[k] >= 0) atomicAdd(acc + ch * (TW * TH) + slot[k], e[k] * v);
                }
            }
        }
        __syncthreads();
        if (inside) {
            bool blocked;
            const scalar_t inv = KIND == KIND_SUM ? (scalar_t)1 : (scalar_t)1 / guarded(s_den[p], blocked);
            scalar_t* o = out + ((long long)n * C + c0) * hw + dst;
            for (int ch = 0; ch < cc; ++ch) o[(long long)ch * hw] = acc[ch * (TW * TH) + p] * inv;
        }
        __syncthreads();
    }
    if (!inside) return;
#if KIND != KIND_SUM
    bool blocked;
    const scalar_t d = guarded(s_den[p], blocked);
    den[(long long)n * hw + dst] = blocked ? -d : d;
#endif
#if KIND == KIND_SOFT
    zmax[(long long)n * hw + dst] = s_z[p];
#endif
}
"""


@functools.lru_cache(maxsize=64)
def _kernels(device_index: int, dtype: torch.dtype, kind: str, eps_mode: str):
    cupy = base._cupy()
    scalar = "double" if dtype == torch.float64 else "float"
    with cupy.cuda.Device(device_index):
        vec4 = scalar == "float" and int(cupy.cuda.Device(device_index).compute_capability) >= 90
        defines = (f"#define SCALAR {scalar}\n#define KIND {base._KINDS.index(kind)}\n"
                   f"#define EPS_MODE {base._EPS_MODES.index(eps_mode)}\n#define VEC4 {int(vec4)}\n"
                   f"#define TW {_TILE_W}\n#define TH {_TILE_H}\n")
        module = cupy.RawModule(code=defines + base._CUDA_SOURCE + _TILE_SOURCE, options=("-std=c++17",))
        return {name: module.get_function(name) for name in ("bin_count", "bin_scan", "bin_fill", "splat_tiles")}


def _forward(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor],
             kind: str, eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Same outputs as ``softsplat._cuda_forward_impl``: out, den and zmax for the backward."""
    n, c, h, w = x.shape
    if n * h * w >= 2 ** 31:
        raise ValueError(f"x has {n * h * w} pixels in all (N*H*W); the CUDA path takes fewer than 2**31: "
                         "split the batch")
    dev, _, _, _, (xs, fl, m) = base._prepare(x, flow, metric, kind, eps_mode)
    kernels = _kernels(dev, xs.dtype, kind, eps_mode)
    acc_dtype = xs.dtype
    n_src = n * h * w
    tiles_x = (w + _TILE_W - 1) // _TILE_W
    per_img = tiles_x * ((h + _TILE_H - 1) // _TILE_H)
    n_tiles = n * per_img
    geometry = (_i32(h), _i32(w), _i32(tiles_x), _i32(per_img))
    counts = torch.zeros(n_tiles, device=x.device, dtype=torch.int32)
    _launch(kernels["bin_count"], n_src, (_i64(n_src), *geometry, _ptr(fl), _ptr(counts)), dev)
    offsets = torch.empty(n_tiles + 1, device=x.device, dtype=torch.int32)
    _launch(kernels["bin_scan"], 1024, (_i32(n_tiles), _ptr(counts), _ptr(offsets)), dev, threads=1024)
    # a source touches at most 4 tiles; the allocator caches this buffer between calls
    sources = torch.empty(4 * n_src, device=x.device, dtype=torch.int32)
    _launch(kernels["bin_fill"], n_src, (_i64(n_src), *geometry, _ptr(fl), _ptr(offsets), _ptr(counts),
                                         _ptr(sources)), dev)
    out = torch.empty((n, c, h, w), device=x.device, dtype=acc_dtype)
    den = torch.empty((n, 1, h, w) if kind != "sum" else (0,), device=x.device, dtype=acc_dtype)
    zmax = torch.empty((n, 1, h, w) if kind == "soft" else (0,), device=x.device, dtype=acc_dtype)
    # channels in as few passes as fit 40 KB of shared memory (at most 48 KB without opt-in)
    per_pass = (40 * 1024) // (_TILE_W * _TILE_H * xs.element_size())
    passes = (c + per_pass - 1) // per_pass
    chunk = (c + passes - 1) // passes
    threads = _TILE_W * _TILE_H
    _launch(kernels["splat_tiles"], n_tiles * threads,
            (_i32(c), *geometry, _i32(chunk), _ptr(xs), _ptr(fl), _ptr(m), _ptr(offsets), _ptr(sources),
             _ptr(out), _ptr(den), _ptr(zmax)), dev, threads, chunk * threads * xs.element_size())
    return out.to(x.dtype), den, zmax


class _TiledFunction(base._SplatFunction):
    """softsplat's autograd wrapper with the tiled forward; the backward is inherited."""

    @staticmethod
    def forward(ctx, x, flow, metric, kind, eps_mode):
        out, den, zmax = _forward(x, flow, metric, kind, eps_mode)
        ctx.kind, ctx.eps_mode, ctx.has_metric = kind, eps_mode, metric is not None
        ctx.save_for_backward(x, flow, metric, out, den, zmax)
        return out


def splat(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor] = None,
          mode: str = "soft") -> torch.Tensor:
    """``softsplat.splat`` with the tiled forward on CUDA (eager only)."""
    kind, eps_mode = base._parse_mode(mode)
    base._validate(x, flow, metric, kind)
    if x.numel() == 0:
        return x.new_zeros(x.shape)
    if x.is_cuda and not torch.are_deterministic_algorithms_enabled() and base._kernels_usable():
        return _TiledFunction.apply(x, flow, metric, kind, eps_mode)
    return _splat_torch(x, flow, metric, kind, eps_mode)
