"""Softmax splatting: differentiable forward warping (Niklaus & Liu, CVPR 2020).

Self-contained: needs torch, and CuPy only for the fast path on CUDA tensors.
Copy this file into your project if you only need the operator.

Conventions
-----------
- ``x``: N x C x H x W, any floating dtype. float16/bfloat16 are accumulated in
  float32 and returned in their own dtype.
- ``flow``: N x 2 x H x W, displacement in pixels, x (right) then y (down).
- ``metric``: N x 1 x H x W importance, needed by ``linear`` and ``soft`` only.
- Every source pixel is splatted bilinearly onto the four target pixels around
  (x + u, y + v). Sources with non-finite flow and targets outside the frame are
  dropped.
- Modes: ``sum`` adds; ``avg`` divides by the splatted weights; ``linear``
  weights by ``metric``; ``soft`` weights by ``exp(metric)``. A suffix says how
  the normaliser is guarded: ``-addeps`` (default, adds 1e-7), ``-zeroeps``
  (empty targets divide by 1) or ``-clipeps`` (clamps at 1e-7).

Stable soft mode
----------------
The published operator computes ``exp(metric)`` unshifted, which overflows for
metrics above ~88. Here every target pixel subtracts Z_max, the largest metric
among the sources that land on it with a positive weight, before ``exp``.
Softmax is shift-invariant, so Z_max cancels in the normalisation and needs no
gradient. The one visible difference: the ``addeps`` epsilon is now relative to
the largest contribution rather than to ``exp(metric)``.

Entry points: ``splat(x, flow, metric=None, mode="soft")`` and the published
``softsplat(tenIn, tenFlow, tenMetric, strMode)``.
"""

from __future__ import annotations

import functools
import struct
import threading
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Sequence, Tuple

import torch

if TYPE_CHECKING:
    import ctypes

__all__ = ["splat", "softsplat", "cuda_available"]

_KINDS = ("sum", "avg", "linear", "soft")
_EPS_MODES = ("addeps", "zeroeps", "clipeps")
_EPS = 1e-7


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------


def _parse_mode(mode: str) -> Tuple[str, str]:
    if not isinstance(mode, str):
        raise ValueError(f"mode must be a string such as 'soft', got {type(mode).__name__}")
    parts = mode.split("-")
    kind = parts[0]
    eps_mode = parts[1] if len(parts) > 1 else "addeps"
    if kind not in _KINDS or eps_mode not in _EPS_MODES or len(parts) > 2:
        raise ValueError(
            f"unknown mode {mode!r}: use one of {', '.join(_KINDS)}, optionally "
            f"suffixed with -{', -'.join(_EPS_MODES)}"
        )
    return kind, eps_mode


def _validate(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor], kind: str) -> None:
    for name, ten in (("x", x), ("flow", flow)):
        if not isinstance(ten, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(ten).__name__}")
        if not ten.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {ten.dtype}")
    if x.dim() != 4:
        raise ValueError(f"x must be N x C x H x W, got shape {tuple(x.shape)}")
    n, _, h, w = x.shape
    if tuple(flow.shape) != (n, 2, h, w):
        raise ValueError(f"flow must be N x 2 x H x W = {(n, 2, h, w)}, got shape {tuple(flow.shape)}")
    if flow.device != x.device:
        raise ValueError(f"flow is on {flow.device} but x is on {x.device}: move both to one device")
    if kind in ("linear", "soft"):
        if metric is None:
            raise ValueError(f"metric is required for mode '{kind}' (N x 1 x H x W)")
        if not isinstance(metric, torch.Tensor) or not metric.is_floating_point():
            raise ValueError("metric must be a floating-point torch.Tensor")
        if tuple(metric.shape) != (n, 1, h, w):
            raise ValueError(f"metric must be N x 1 x H x W = {(n, 1, h, w)}, got shape {tuple(metric.shape)}")
        if metric.device != x.device:
            raise ValueError(f"metric is on {metric.device} but x is on {x.device}: move both to one device")
    elif metric is not None:
        raise ValueError(f"metric must be None for mode '{kind}'; it is used by 'linear' and 'soft' only")


def _acc_dtype(*tensors: Optional[torch.Tensor]) -> torch.dtype:
    if any(t is not None and t.dtype == torch.float64 for t in tensors):
        return torch.float64
    return torch.float32


# ----------------------------------------------------------------------------
# PyTorch path: runs on any device, differentiable through autograd, the oracle
# ----------------------------------------------------------------------------


def _corners(flow: torch.Tensor) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Yield (target index, valid mask, bilinear weight) for each of the four corners.

    Shapes are N x (H*W). Sources with non-finite flow are invalid everywhere.
    """
    n, _, h, w = flow.shape
    base_x = torch.arange(w, device=flow.device, dtype=flow.dtype).view(1, 1, w)
    base_y = torch.arange(h, device=flow.device, dtype=flow.dtype).view(1, h, 1)
    finite = torch.isfinite(flow[:, 0]) & torch.isfinite(flow[:, 1])
    # sanitise before floor(): where() would pass NaN gradients from the other branch
    u = torch.where(finite, flow[:, 0], torch.zeros_like(flow[:, 0]))
    v = torch.where(finite, flow[:, 1], torch.zeros_like(flow[:, 1]))
    gx = base_x + u
    gy = base_y + v
    x0 = torch.floor(gx.detach())
    y0 = torch.floor(gy.detach())
    fx = gx - x0
    fy = gy - y0
    for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
        tx = x0 + dx
        ty = y0 + dy
        wx = fx if dx else 1.0 - fx
        wy = fy if dy else 1.0 - fy
        valid = finite & (tx >= 0) & (tx <= w - 1) & (ty >= 0) & (ty <= h - 1)
        index = torch.where(valid, ty * w + tx, torch.zeros_like(tx)).long()
        # reshape, not view: a transposed or otherwise strided flow gives strided results here
        yield index.reshape(n, -1), valid.reshape(n, -1), (wx * wy).reshape(n, -1)


def _zmax_torch(flow: torch.Tensor, metric: torch.Tensor) -> torch.Tensor:
    """Per-target max of the metric over sources landing there with positive weight."""
    n, _, h, w = flow.shape
    m = metric.reshape(n, -1)
    zmax = torch.full((n, h * w), float("-inf"), device=m.device, dtype=m.dtype)
    neg_inf = torch.full_like(m, float("-inf"))
    for index, valid, weight in _corners(flow):
        zmax.scatter_reduce_(1, index, torch.where(valid & (weight > 0), m, neg_inf), reduce="amax")
    return zmax


def _normalise(acc: torch.Tensor, eps_mode: str) -> torch.Tensor:
    num, den = acc[:, :-1], acc[:, -1:]
    if eps_mode == "addeps":
        den = den + _EPS
    elif eps_mode == "zeroeps":
        den = torch.where(den == 0, torch.ones_like(den), den)
    else:
        den = den.clamp_min(_EPS)
    return num / den


def _index_add_eager(acc: torch.Tensor, targets: torch.Tensor, values: torch.Tensor) -> None:
    """``acc.index_add_(0, targets, values)`` outside any compiled graph. Inductor's CPU code for this scatter of
    transposed rows, run on several threads, adds the inner loop's offset twice and writes out of bounds (heap
    corruption, or wrong sums: pytorch/pytorch#191837, a fix proposed in #191861 after torch 2.13); compiled,
    the whole network aborted on the CPU. Costs a graph break per corner, on the CPU only. Traced, it is called
    through ``_COMPILER.index_add`` (``torch.compiler.disable``; at the end of this file)."""
    acc.index_add_(0, targets, values)


def _splat_torch(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor],
                 kind: str, eps_mode: str) -> torch.Tensor:
    n, c, h, w = x.shape
    acc_dtype = _acc_dtype(x, flow, metric)
    xs = x.to(acc_dtype).reshape(n, c, h * w)
    flow = flow.to(acc_dtype)
    m = metric.to(acc_dtype).reshape(n, h * w) if metric is not None else None
    if kind != "sum":
        xs = torch.cat([xs, xs.new_ones(n, 1, h * w)], 1)
    zmax = None
    if kind == "soft":
        with torch.no_grad():
            zmax = _zmax_torch(flow.detach(), m.detach())
    channels = xs.shape[1]
    acc = xs.new_zeros(n * h * w, channels)
    batch_offset = (torch.arange(n, device=x.device) * (h * w)).view(n, 1)
    for index, valid, weight in _corners(flow):
        if kind == "linear":
            weight = weight * m
        elif kind == "soft":
            z = torch.gather(zmax, 1, index)
            z = torch.where(torch.isfinite(z), z, m.detach())
            # the exponent is <= 0 wherever the weight is positive; the clamp only
            # keeps zero-weight corners (whose gradient still counts) from overflowing
            weight = weight * torch.exp(torch.clamp(m - z, max=0.0))
        weight = torch.where(valid, weight, torch.zeros_like(weight))
        values = (xs * weight.unsqueeze(1)).permute(0, 2, 1).reshape(-1, channels)
        targets = (index + batch_offset).reshape(-1)
        if acc.device.type == "cpu":
            # on the CPU index_add_ is always deterministic, and 1.3-5x faster than index_put_
            if torch.compiler.is_compiling():
                _COMPILER.index_add(acc, targets, values)
            else:
                acc.index_add_(0, targets, values)
        else:
            # index_put_ with accumulate is deterministic on CUDA under use_deterministic_algorithms
            acc.index_put_((targets,), values, accumulate=True)
    acc = acc.view(n, h * w, channels).permute(0, 2, 1).reshape(n, channels, h, w)
    out = acc if kind == "sum" else _normalise(acc, eps_mode)
    return out.to(x.dtype)


# ----------------------------------------------------------------------------
# CUDA path: CuPy kernels, compiled at run time once per dtype and device
# ----------------------------------------------------------------------------

# Half-precision input and output for CuPy kernels, shared with model/correlation.py: with IO_KIND 1 (bfloat16) or 2
# (float16) io_t is the raw 16-bit word, converted in registers by io_load / io_store; with IO_KIND 0 (or undefined)
# it is scalar_t, which the including source typedefs first.
IO_SOURCE = r"""
#ifndef IO_KIND
#define IO_KIND 0
#endif
#if IO_KIND == 0
typedef scalar_t io_t;
__device__ __forceinline__ scalar_t io_load(io_t v) { return v; }
__device__ __forceinline__ io_t io_store(scalar_t v) { return v; }
#else
typedef unsigned short io_t;
__device__ __forceinline__ float io_load(io_t v) {
#if IO_KIND == 1
    return __uint_as_float(((unsigned int)v) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
#endif
}
__device__ __forceinline__ io_t io_store(float f) {
#if IO_KIND == 1
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (io_t)0x7fc0u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (io_t)(u >> 16);
#else
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}
#endif
"""

IO_KINDS = {torch.bfloat16: 1, torch.float16: 2}  # the IO_KIND of each half-precision dtype

_CUDA_SOURCE = r"""
#define KIND_SUM 0
#define KIND_AVG 1
#define KIND_LINEAR 2
#define KIND_SOFT 3

typedef SCALAR scalar_t;

// x, the output, the output's gradient and x's gradient are read and written in io_t: scalar_t, or (IO_KIND
// 1/2) bfloat16/float16 held as raw 16-bit words, converted in registers (no headers needed), so
// half-precision tensors need no float32 copies. Conversions round to nearest even, as PyTorch's do (NaN stays a NaN).
""" + IO_SOURCE + r"""
__device__ __forceinline__ void atomic_max_scalar(float* address, float value) {
    // IEEE floats order like sign-magnitude integers: non-negative values compare as
    // signed ints, negative values in reverse as unsigned ints; -inf is the initial value.
    if (value >= 0.0f) {
        atomicMax((int*)address, __float_as_int(value));
    } else {
        atomicMin((unsigned int*)address, __float_as_uint(value));
    }
}

__device__ __forceinline__ void atomic_max_scalar(double* address, double value) {
    unsigned long long* p = (unsigned long long*)address;
    unsigned long long old = *p;
    while (__longlong_as_double(old) < value) {
        unsigned long long assumed = old;
        old = atomicCAS(p, assumed, __double_as_longlong(value));
        if (old == assumed) break;
    }
}

__device__ __forceinline__ scalar_t exp_scalar(scalar_t v) { return exp(v); }

struct Corners {
    long long target[4];   // index into N*H*W, or -1
    int x0, y0;            // top-left corner (the cell), in [-1, W-1] x [-1, H-1] when any corner is inside
    scalar_t weight[4];
    scalar_t dwdu[4];
    scalar_t dwdv[4];
};

// Bilinear footprint of source pixel (n, y, x) displaced by (u, v).
__device__ __forceinline__ bool corners_of(long long src, int H, int W, const scalar_t* flow, Corners& c) {
    const long long hw = (long long)H * W;
    const long long n = src / hw;
    const long long s = src - n * hw;
    const int y = (int)(s / W);
    const int x = (int)(s - (long long)y * W);
    const scalar_t u = flow[(n * 2) * hw + s];
    const scalar_t v = flow[(n * 2 + 1) * hw + s];
    if (!isfinite(u) || !isfinite(v)) return false;
    const scalar_t gx = (scalar_t)x + u;
    const scalar_t gy = (scalar_t)y + v;
    const scalar_t x0 = floor(gx);
    const scalar_t y0 = floor(gy);
    const scalar_t fx = gx - x0;
    const scalar_t fy = gy - y0;
    c.x0 = (int)fmax(fmin(x0, (scalar_t)W), (scalar_t)-2);  // clamped so the conversion is defined
    c.y0 = (int)fmax(fmin(y0, (scalar_t)H), (scalar_t)-2);
    bool any = false;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int dx = k & 1;
        const int dy = k >> 1;
        const scalar_t tx = x0 + dx;
        const scalar_t ty = y0 + dy;
        const scalar_t wx = dx ? fx : (scalar_t)1 - fx;
        const scalar_t wy = dy ? fy : (scalar_t)1 - fy;
        c.weight[k] = wx * wy;
        c.dwdu[k] = (dx ? (scalar_t)1 : (scalar_t)-1) * wy;
        c.dwdv[k] = (dy ? (scalar_t)1 : (scalar_t)-1) * wx;
        if (tx >= 0 && tx <= W - 1 && ty >= 0 && ty <= H - 1) {
            c.target[k] = n * hw + (long long)ty * W + (long long)tx;
            any = true;
        } else {
            c.target[k] = -1;
        }
    }
    return any;
}

// Per-target factor g(s, t) that multiplies the bilinear weight.
__device__ __forceinline__ scalar_t factor_of(long long src, long long target, const scalar_t* metric,
                                              const scalar_t* zmax) {
#if KIND == KIND_LINEAR
    return metric[src];
#elif KIND == KIND_SOFT
    const scalar_t z = zmax[target];
    if (!isfinite(z)) return (scalar_t)0;  // nothing with positive weight lands here
    // <= 0 wherever the weight is positive; the clamp guards zero-weight corners
    return exp_scalar(fmin(metric[src] - z, (scalar_t)0));
#else
    return (scalar_t)1;
#endif
}

// Z_max in two steps. A source whose four bilinear weights are all positive (almost every source) lands
// on the 2x2 block of targets whose top-left corner is its cell (floor(x + u), floor(y + v)), so one atomic
// max on the cell (cellmax: (H + 1) x (W + 1) per image, cell (-1, -1) first) stands for four on the
// targets. A source with a zero weight (an integer position) updates its positive-weight targets in zmax
// directly. zmax_gather then gives every target the max of its own entry and of the four cells whose
// blocks hold it: exactly the max over the sources that land on it with positive weight.
extern "C" __global__ void zmax_kernel(const long long n_src, const int H, const int W,
                                       const scalar_t* __restrict__ flow,
                                       const scalar_t* __restrict__ metric,
                                       scalar_t* zmax, scalar_t* cellmax) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (src >= n_src) return;
    Corners c;
    if (!corners_of(src, H, W, flow, c)) return;
    const scalar_t m = metric[src];
    // a plain read first: many candidates are below the stored max, and an atomic costs far more
    // than a load (a stale read only costs an unneeded atomic, never a wrong max)
    if (c.weight[0] > 0 && c.weight[1] > 0 && c.weight[2] > 0 && c.weight[3] > 0) {
        const long long n = src / ((long long)H * W);
        scalar_t* cell = cellmax + n * (long long)(H + 1) * (W + 1) + (long long)(c.y0 + 1) * (W + 1) + (c.x0 + 1);
        if (m > *cell) atomic_max_scalar(cell, m);
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (c.target[k] >= 0 && c.weight[k] > 0 && m > zmax[c.target[k]]) atomic_max_scalar(zmax + c.target[k], m);
    }
}

extern "C" __global__ void zmax_gather(const long long n_dst, const int CP, const int H, const int W,
                                       const scalar_t* __restrict__ cellmax, scalar_t* __restrict__ zmax,
                                       scalar_t* __restrict__ acc) {
    // also zeroes the block's rows of the accumulator (one contiguous range, written coalesced), which
    // spares the forward a separate fill
    const long long base = (long long)blockIdx.x * blockDim.x;
    const long long rows = min((long long)blockDim.x, n_dst - base);
    for (long long i = threadIdx.x; i < rows * CP; i += blockDim.x) acc[base * CP + i] = 0;
    const long long dst = base + threadIdx.x;
    if (dst >= n_dst) return;
    const long long hw = (long long)H * W;
    const long long n = dst / hw;
    const long long s = dst - n * hw;
    const int y = (int)(s / W);
    const int x = (int)(s - (long long)y * W);
    // target (x, y) is corner (1, 1) of cell (x - 1, y - 1), stored at row y, column x of cellmax
    const scalar_t* cell = cellmax + n * (long long)(H + 1) * (W + 1) + (long long)y * (W + 1) + x;
    const scalar_t top = fmax(cell[0], cell[1]);
    const scalar_t bottom = fmax(cell[W + 1], cell[W + 2]);
    zmax[dst] = fmax(zmax[dst], fmax(top, bottom));
}

// Accumulates into acc, laid out N*H*W x CP (channels last, CP a multiple of 4 for
// float so that sm_90's 16-byte vector atomics apply): channels 0..C-1 the splatted
// input, channel C the splatted weight (all kinds but sum).

// The four corner weights of a source, times the mode's factor (zero outside the frame).
__device__ __forceinline__ void splat_weights(long long src, const Corners& c, const scalar_t* metric,
                                              const scalar_t* zmax, scalar_t* e) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        e[k] = c.target[k] >= 0 ? c.weight[k] * factor_of(src, c.target[k], metric, zmax) : (scalar_t)0;
    }
}

#if VEC4
// Channels c0..c0+3 of one source (the weight channel 1, padding 0) added to its four targets' rows.
__device__ __forceinline__ void splat_chunk(const io_t* in, long long hw, int C, int CP, int c0, const Corners& c,
                                            const float* e, float* acc) {
    float val[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int ch = c0 + j;
        val[j] = ch < C ? io_load(in[(long long)ch * hw]) : (ch == C && KIND != KIND_SUM ? 1.0f : 0.0f);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (c.target[k] < 0 || e[k] == 0) continue;
        atomicAdd((float4*)(acc + c.target[k] * CP + c0),
                  make_float4(e[k] * val[0], e[k] * val[1], e[k] * val[2], e[k] * val[3]));
    }
}
#endif

extern "C" __global__ void splat_forward(const long long n_src, const int C, const int CP, const int H, const int W,
                                         const io_t* __restrict__ input,
                                         const scalar_t* __restrict__ flow,
                                         const scalar_t* __restrict__ metric,
                                         const scalar_t* __restrict__ zmax,
                                         scalar_t* __restrict__ acc) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (src >= n_src) return;
    Corners c;
    if (!corners_of(src, H, W, flow, c)) return;
    const long long hw = (long long)H * W;
    const long long n = src / hw;
    const long long s = src - n * hw;
    scalar_t e[4];
    splat_weights(src, c, metric, zmax, e);
    const int channels = (KIND == KIND_SUM) ? C : C + 1;
    const io_t* in = input + n * C * hw + s;
#if VEC4
    for (int c0 = 0; c0 < channels; c0 += 4) splat_chunk(in, hw, C, CP, c0, c, e, acc);
#else
    for (int ch = 0; ch < channels; ++ch) {
        const scalar_t val = ch < C ? io_load(in[(long long)ch * hw]) : (scalar_t)1;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (c.target[k] < 0 || e[k] == 0) continue;
            atomicAdd(acc + c.target[k] * CP + ch, e[k] * val);
        }
    }
#endif
}

// splat_forward for rows of more than 4 floats (VEC4 builds): CP / 4 consecutive threads share a source, each
// adding one float4 of its row, so a warp's atomics land on a few contiguous rows (whole cache lines)
// instead of on 32 scattered ones. Threads are numbered source * (CP / 4) + chunk.
extern "C" __global__ void splat_forward_rows(const long long n_threads, const int C, const int CP, const int H,
                                              const int W, const io_t* __restrict__ input,
                                              const scalar_t* __restrict__ flow,
                                              const scalar_t* __restrict__ metric,
                                              const scalar_t* __restrict__ zmax,
                                              scalar_t* __restrict__ acc) {
#if VEC4
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_threads) return;
    const int chunks = CP >> 2;
    const long long src = t / chunks;
    const int c0 = (int)(t - src * chunks) * 4;
    Corners c;
    if (!corners_of(src, H, W, flow, c)) return;
    const long long hw = (long long)H * W;
    const long long n = src / hw;
    scalar_t e[4];
    splat_weights(src, c, metric, zmax, e);
    splat_chunk(input + n * C * hw + (src - n * hw), hw, C, CP, c0, c, e, acc);
#endif
}

// acc (channels last) -> out (N x C x H x W), divided by the guarded weight. den gets the
// guarded weight, negated where the guard blocks its gradient (zeroeps/clipeps); it may be null (no
// backward to come).
// A block's acc rows are one contiguous range: it is read coalesced into shared memory first.
extern "C" __global__ void splat_normalise(const long long n_dst, const int C, const int CP, const int H, const int W,
                                           const scalar_t* __restrict__ acc,
                                           io_t* __restrict__ out,
                                           scalar_t* __restrict__ den) {
    extern __shared__ unsigned char smem_raw[];
    scalar_t* tile = (scalar_t*)smem_raw;
    const long long base = (long long)blockIdx.x * blockDim.x;
    const long long rows = min((long long)blockDim.x, n_dst - base);
    for (long long i = threadIdx.x; i < rows * CP; i += blockDim.x) tile[i] = acc[base * CP + i];
    __syncthreads();
    const long long dst = base + threadIdx.x;
    if (dst >= n_dst) return;
    const long long hw = (long long)H * W;
    const long long n = dst / hw;
    const long long t = dst - n * hw;
    const scalar_t* a = tile + (long long)threadIdx.x * CP;
    scalar_t inv = 1;
#if KIND != KIND_SUM
    scalar_t d = a[C];
    bool blocked = false;
#if EPS_MODE == 0
    d = d + (scalar_t)1e-7;
#elif EPS_MODE == 1
    if (d == 0) { d = 1; blocked = true; }
#else
    if (d < (scalar_t)1e-7) { d = (scalar_t)1e-7; blocked = true; }
#endif
    inv = (scalar_t)1 / d;
    if (den != nullptr) den[dst] = blocked ? -d : d;
#endif
    io_t* o = out + n * C * hw + t;
    for (int ch = 0; ch < C; ++ch) o[(long long)ch * hw] = io_store(a[ch] * inv);
}

// Per target pixel: packs what a source needs from it into one channels-last row of CP
// values: for normalised kinds out_t = A_t / D_t, so row[c] = dL/dA_t[c] = g_t[c] / D_t and
// row[C] = dL/dD_t = -sum_c g_t[c] out_t[c] / D_t (0 where the eps guard blocks it);
// for sum, row[c] = g_t[c]. Reading one row instead of 2C scattered values is the point.
extern "C" __global__ void splat_backward_pack(const long long n_dst, const int C, const int CP, const int H,
                                               const int W,
                                               const io_t* __restrict__ grad_out,
                                               const io_t* __restrict__ out,
                                               const scalar_t* __restrict__ den,
                                               scalar_t* __restrict__ packed) {
    // rows are built in shared memory, then the block's contiguous range is written coalesced
    extern __shared__ unsigned char smem_raw[];
    scalar_t* tile = (scalar_t*)smem_raw;
    const long long base = (long long)blockIdx.x * blockDim.x;
    const long long dst = base + threadIdx.x;
    if (dst < n_dst) {
        const long long hw = (long long)H * W;
        const long long n = dst / hw;
        const long long t = dst - n * hw;
        const io_t* g = grad_out + n * C * hw + t;
        scalar_t* row = tile + (long long)threadIdx.x * CP;
#if KIND == KIND_SUM
        for (int ch = 0; ch < C; ++ch) row[ch] = io_load(g[(long long)ch * hw]);
        for (int ch = C; ch < CP; ++ch) row[ch] = 0;
#else
        const scalar_t d = den[dst];
        const scalar_t inv = (scalar_t)1 / fabs(d);
        const io_t* o = out + n * C * hw + t;
        scalar_t gd = 0;
        for (int ch = 0; ch < C; ++ch) {
            const scalar_t gv = io_load(g[(long long)ch * hw]) * inv;
            row[ch] = gv;
            gd -= gv * io_load(o[(long long)ch * hw]);
        }
        row[C] = d > 0 ? gd : (scalar_t)0;
        for (int ch = C + 1; ch < CP; ++ch) row[ch] = 0;
#endif
    }
    __syncthreads();
    const long long rows = min((long long)blockDim.x, n_dst - base);
    for (long long i = threadIdx.x; i < rows * CP; i += blockDim.x) packed[base * CP + i] = tile[i];
}

// One thread per source pixel: gathers the packed rows of its four targets.
// A source adds e * x to A_t and e to D_t (e = weight * factor), so with row = packed[t]:
// dL/dx[c] = sum_k e_k row_k[c], and G_k = sum_c x[c] row_k[c] + row_k[C] is dL/de_k.
extern "C" __global__ void splat_backward(const long long n_src, const int C, const int CP, const int H, const int W,
                                          const io_t* __restrict__ input,
                                          const scalar_t* __restrict__ flow,
                                          const scalar_t* __restrict__ metric,
                                          const scalar_t* __restrict__ zmax,
                                          const scalar_t* __restrict__ packed,
                                          io_t* __restrict__ grad_input,
                                          scalar_t* __restrict__ grad_flow,
                                          scalar_t* __restrict__ grad_metric) {
    const long long src = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (src >= n_src) return;
    const long long hw = (long long)H * W;
    const long long n = src / hw;
    const long long s = src - n * hw;
    Corners c;
    const bool any = corners_of(src, H, W, flow, c);
    io_t* gin = grad_input + n * C * hw + s;
    if (!any) {
        for (int ch = 0; ch < C; ++ch) gin[(long long)ch * hw] = io_store((scalar_t)0);
        grad_flow[(n * 2) * hw + s] = 0;
        grad_flow[(n * 2 + 1) * hw + s] = 0;
#if KIND == KIND_LINEAR || KIND == KIND_SOFT
        grad_metric[src] = 0;
#endif
        return;
    }
    scalar_t f[4], e[4], gsum[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        gsum[k] = 0;
        f[k] = c.target[k] >= 0 ? factor_of(src, c.target[k], metric, zmax) : (scalar_t)0;
        e[k] = c.weight[k] * f[k];
    }
    const io_t* in = input + n * C * hw + s;
    const int channels = (KIND == KIND_SUM) ? C : C + 1;
#if VEC4
    for (int c0 = 0; c0 < channels; c0 += 4) {
        float xv[4], gx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int ch = c0 + j;
            xv[j] = ch < C ? io_load(in[(long long)ch * hw]) : (ch == C ? 1.0f : 0.0f);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (c.target[k] < 0) continue;
            const float4 r = *(const float4*)(packed + c.target[k] * CP + c0);
            gx[0] += e[k] * r.x; gx[1] += e[k] * r.y; gx[2] += e[k] * r.z; gx[3] += e[k] * r.w;
            gsum[k] += xv[0] * r.x + xv[1] * r.y + xv[2] * r.z + xv[3] * r.w;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (c0 + j < C) gin[(long long)(c0 + j) * hw] = io_store(gx[j]);
        }
    }
#else
    for (int ch = 0; ch < channels; ++ch) {
        const scalar_t xv = ch < C ? io_load(in[(long long)ch * hw]) : (scalar_t)1;
        scalar_t gx = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (c.target[k] < 0) continue;
            const scalar_t r = packed[c.target[k] * CP + ch];
            gx += e[k] * r;
            gsum[k] += xv * r;
        }
        if (ch < C) gin[(long long)ch * hw] = io_store(gx);
    }
#endif
    scalar_t gu = 0, gv = 0, gm = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (c.target[k] < 0) continue;
        gu += c.dwdu[k] * f[k] * gsum[k];
        gv += c.dwdv[k] * f[k] * gsum[k];
#if KIND == KIND_LINEAR
        gm += c.weight[k] * gsum[k];
#elif KIND == KIND_SOFT
        gm += e[k] * gsum[k];
#endif
    }
    grad_flow[(n * 2) * hw + s] = gu;
    grad_flow[(n * 2 + 1) * hw + s] = gv;
#if KIND == KIND_LINEAR || KIND == KIND_SOFT
    grad_metric[src] = gm;
#endif
}
"""

_THREADS = 256


def cuda_available() -> bool:
    """True when CuPy imports and sees a GPU, so CUDA tensors take the fast path."""
    return cupy_module() is not None


@functools.lru_cache(maxsize=None)
def cupy_module() -> Optional[ModuleType]:
    """CuPy, imported once, when it is installed and sees a GPU; else None (CUDA tensors take the PyTorch path)."""
    try:
        import cupy  # optional dependency, CUDA only: is it installed?
    except Exception:  # ImportError, or a CuPy built for another CUDA
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:
        return None
    return cupy


@functools.lru_cache(maxsize=128)  # 4 kinds x 3 eps modes x 4 dtype/io variants per device, two devices
def _module(device_index: int, dtype: torch.dtype, kind: str, eps_mode: str,
            io_dtype: Optional[torch.dtype] = None) -> Tuple[Dict[str, Any], bool]:
    """Compiled kernels for one device, dtype and mode; sizes are kernel arguments. With ``io_dtype``
    (bfloat16 or float16, for a float32 ``dtype``) the forward kernels read and write that type."""
    cupy = cupy_module()
    scalar = "double" if dtype == torch.float64 else "float"
    with cupy.cuda.Device(device_index):
        major = cupy.cuda.Device(device_index).compute_capability
        vec4 = scalar == "float" and int(major) >= 90
        defines = (
            f"#define SCALAR {scalar}\n#define KIND {_KINDS.index(kind)}\n"
            f"#define EPS_MODE {_EPS_MODES.index(eps_mode)}\n#define VEC4 {int(vec4)}\n"
            f"#define IO_KIND {IO_KINDS.get(io_dtype, 0)}\n"
        )
        module = cupy.RawModule(code=defines + _CUDA_SOURCE, options=("-std=c++17",))
        names = ("zmax_kernel", "zmax_gather", "splat_forward", "splat_forward_rows", "splat_normalise",
                 "splat_backward_pack", "splat_backward")
        kernels = {name: module.get_function(name) for name in names}
    return kernels, vec4


def _current_stream_ptr(device_index: int) -> int:
    """PyTorch's current stream on the device, as a raw pointer: torch._C's accessor (the one torch.compile's
    generated code uses) takes 0.2 us where torch.cuda.current_stream() builds a Stream object in 3 us."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device_index) if raw is not None else torch.cuda.current_stream(device_index).cuda_stream


@functools.lru_cache(maxsize=1024)  # 7 kernels x the 128 modules of _module, with room for correlation's
def _function(kernel: Any, device_index: int) -> Any:
    """The CUDA function behind a CuPy RawKernel on one device (compiled there on first use)."""
    with cupy_module().cuda.Device(device_index):
        return kernel.kernel


_PARAMS = threading.local()  # per thread and kernel signature: the argument buffer cuLaunchKernel reads


@functools.lru_cache(maxsize=64)
def _layout(signature: str) -> Tuple[struct.Struct, Tuple[int, ...]]:
    """The parameter area of a kernel whose signature is a string of q (long long), i (int) and P (pointer)
    codes, each at its C alignment as nvcc lays kernel parameters out: its packer and each one's offset."""
    if not signature or set(signature) - set("qiP"):
        raise ValueError(f"kernel signature {signature!r} may use only q, i and P")
    offsets = tuple(struct.calcsize("@" + signature[:k + 1]) - struct.calcsize(signature[k])
                    for k in range(len(signature)))
    return struct.Struct("@" + signature), offsets


def _param_buffer(signature: str
                  ) -> Tuple[struct.Struct, ctypes.Array[ctypes.c_char], ctypes.Array[ctypes.c_void_p], int]:
    """This thread's argument buffer for a signature, and the array of pointers to its fields that
    cuLaunchKernel takes as ``kernelParams`` (made on first use). The driver copies the values at launch,
    also when a CUDA graph captures the launch, so the buffer is reused for the next one."""
    cache = getattr(_PARAMS, "cache", None)
    if cache is None:
        cache = _PARAMS.cache = {}
    entry = cache.get(signature)
    if entry is None:
        import ctypes

        layout, offsets = _layout(signature)
        data = ctypes.create_string_buffer(layout.size)
        base = ctypes.addressof(data)
        pointers = (ctypes.c_void_p * len(offsets))(*(base + offset for offset in offsets))
        entry = cache[signature] = (layout, data, pointers, ctypes.addressof(pointers))
    return entry


def launch(kernel: Any, count: int, signature: str, args: Sequence[int], device_index: int, threads: int = _THREADS,
           shared_mem: int = 0, grid_y: int = 1) -> None:
    """Launch ``count`` threads (times ``grid_y`` rows of blocks) of a RawKernel on PyTorch's current stream of
    the device. ``args`` are Python ints (pointers as addresses, see ``_ptr``), packed by ``signature`` into a
    reused buffer whose fields cuLaunchKernel reads: a launch costs a few microseconds of host time, where
    CuPy's generic call converts every argument on its own. The device is made current only when it is not
    already."""
    cupy = cupy_module()
    layout, data, _, pointers = _param_buffer(signature)
    layout.pack_into(data, 0, *args)
    function = _function(kernel, device_index)
    blocks = (count + threads - 1) // threads
    stream = _current_stream_ptr(device_index)
    if cupy.cuda.runtime.getDevice() == device_index:
        cupy.cuda.driver.launchKernel(function.ptr, blocks, grid_y, 1, threads, 1, 1, shared_mem, stream, pointers, 0)
    else:
        with cupy.cuda.Device(device_index):
            cupy.cuda.driver.launchKernel(function.ptr, blocks, grid_y, 1, threads, 1, 1, shared_mem, stream,
                                          pointers, 0)


def _tile_launch(row_bytes: int) -> Tuple[int, int]:
    """Threads per block and shared memory for kernels that stage one row per thread."""
    threads = _THREADS
    while threads > 32 and threads * row_bytes > 32768:
        threads //= 2
    return threads, threads * row_bytes


def _ptr(t: Optional[torch.Tensor]) -> int:
    """A tensor's device address as a kernel argument (0, a null pointer, for None)."""
    return t.data_ptr() if t is not None else 0


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` contiguous in ``dtype``, without a dispatcher call when it already is (host time per call counts)."""
    return t if t.dtype == dtype and t.is_contiguous() else t.to(dtype).contiguous()


def _prepare(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor], kind: str, eps_mode: str,
             *more: torch.Tensor,
             native_io: bool = False) -> Tuple[int, Dict[str, Any], bool, int, Tuple[Optional[torch.Tensor], ...]]:
    """What forward and backward both need: device index, kernels, whether they use vector atomics, the
    accumulator row width (channels, padded to 4 for vector atomics), and the inputs (then ``more``, tensors
    shaped like ``x``: the output and its gradient) as contiguous tensors of the accumulation dtype (metric
    stays None for sum/avg). With ``native_io``, a bfloat16/float16 ``x`` accumulated in float32 stays in its
    dtype, ``more`` is brought to that dtype, and the kernels read and write them as such."""
    acc_dtype = _acc_dtype(x, flow, metric)
    io_dtype = x.dtype if native_io and acc_dtype == torch.float32 and x.dtype in IO_KINDS else None
    dev = x.device.index  # a CUDA tensor's device always carries its index
    kernels, vec4 = _module(dev, acc_dtype, kind, eps_mode, io_dtype)
    channels = x.shape[1] if kind == "sum" else x.shape[1] + 1
    cp = (channels + 3) // 4 * 4 if vec4 else channels
    xs = x.contiguous() if io_dtype is not None else _as(x, acc_dtype)
    tensors = tuple(_as(t, acc_dtype) if t is not None else None for t in (flow, metric))
    return dev, kernels, vec4, cp, (xs, *tensors, *(_as(t, xs.dtype) for t in more))


# kernel parameter layouts (see _layout): n, then sizes, then pointers
_SIG_ZMAX = "qiiPPPP"
_SIG_GATHER = "qiiiPPP"
_SIG_FORWARD = "qiiiiPPPPP"
_SIG_NORMALISE = "qiiiiPPP"
_SIG_PACK = "qiiiiPPPP"
_SIG_BACKWARD = "qiiiiPPPPPPPP"


def _cuda_forward_impl(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor],
                       kind: str, eps_mode: str,
                       keep: bool = True) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Output, guarded normaliser and Z_max; without ``keep`` (no backward to come) the normaliser is not
    written (an empty tensor is returned in its place)."""
    n, c, h, w = x.shape
    dev, kernels, vec4, cp, (xs, fl, m) = _prepare(x, flow, metric, kind, eps_mode, native_io=True)
    acc_dtype = fl.dtype
    n_src = n * h * w
    zmax = torch.empty(0, device=x.device, dtype=acc_dtype)
    if kind == "soft":
        # one allocation and fill for both (a fill costs ~10 us of host time); zmax_gather zeroes acc
        both = torch.full((n * h * w + n * (h + 1) * (w + 1),), float("-inf"), device=x.device, dtype=acc_dtype)
        zmax = both[:n * h * w].view(n, 1, h, w)
        cellmax = both[n * h * w:]
        acc = torch.empty((n_src, cp), device=x.device, dtype=acc_dtype)
        launch(kernels["zmax_kernel"], n_src, _SIG_ZMAX, (n_src, h, w, _ptr(fl), _ptr(m), _ptr(zmax), _ptr(cellmax)),
                dev)
        launch(kernels["zmax_gather"], n_src, _SIG_GATHER, (n_src, cp, h, w, _ptr(cellmax), _ptr(zmax), _ptr(acc)),
                dev)
    else:
        acc = torch.zeros((n_src, cp), device=x.device, dtype=acc_dtype)
    # rows wider than one float4: a thread per float4 of a source's row (vec4 builds), else a thread per source
    rows = vec4 and cp > 4
    threads = n_src * cp // 4 if rows else n_src
    launch(kernels["splat_forward_rows" if rows else "splat_forward"], threads, _SIG_FORWARD,
            (threads, c, cp, h, w, _ptr(xs), _ptr(fl), _ptr(m), _ptr(zmax), _ptr(acc)), dev)
    out = torch.empty((n, c, h, w), device=x.device, dtype=xs.dtype)  # x's own dtype when read natively
    den = torch.empty((n, 1, h, w) if kind != "sum" and keep else (0,), device=x.device, dtype=acc_dtype)
    threads, smem = _tile_launch(cp * acc.element_size())
    launch(kernels["splat_normalise"], n_src, _SIG_NORMALISE,
            (n_src, c, cp, h, w, _ptr(acc), _ptr(out), _ptr(den) if den.numel() else 0), dev, threads, smem)
    return _as(out, x.dtype), den, zmax


def _cuda_backward_impl(grad_out: torch.Tensor, x: torch.Tensor, flow: torch.Tensor,
                        metric: Optional[torch.Tensor], out: torch.Tensor, den: torch.Tensor,
                        zmax: torch.Tensor, kind: str,
                        eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    n, c, h, w = x.shape
    # half-precision x, output and gradients are read and written natively, as in the forward
    dev, kernels, _, cp, (xs, fl, m, g, o) = _prepare(x, flow, metric, kind, eps_mode, grad_out, out, native_io=True)
    n_src = n * h * w
    packed = torch.empty((n_src, cp), device=x.device, dtype=fl.dtype)
    threads, smem = _tile_launch(cp * packed.element_size())
    launch(kernels["splat_backward_pack"], n_src, _SIG_PACK,
            (n_src, c, cp, h, w, _ptr(g), _ptr(o), _ptr(den), _ptr(packed)), dev, threads, smem)
    grad_x = torch.empty_like(xs)
    grad_flow = torch.empty_like(fl)
    grad_metric = torch.empty_like(m) if m is not None else None
    launch(kernels["splat_backward"], n_src, _SIG_BACKWARD,
            (n_src, c, cp, h, w, _ptr(xs), _ptr(fl), _ptr(m), _ptr(zmax), _ptr(packed), _ptr(grad_x), _ptr(grad_flow),
             _ptr(grad_metric)), dev)
    return grad_x, grad_flow, grad_metric


class _SplatFunction(torch.autograd.Function):
    """Eager-mode autograd wrapper: the same kernels as the custom op, less dispatch overhead."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor], kind: str,
                eps_mode: str) -> torch.Tensor:
        # splat() calls this only when an input needs a gradient, so the backward's tensors are always kept
        out, den, zmax = _cuda_forward_impl(x, flow, metric, kind, eps_mode)
        ctx.kind, ctx.eps_mode, ctx.has_metric = kind, eps_mode, metric is not None
        ctx.save_for_backward(x, flow, metric, out, den, zmax)
        return out

    @staticmethod
    def backward(ctx: Any,
                 grad_out: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], None, None]:
        x, flow, metric, out, den, zmax = ctx.saved_tensors
        gx, gf, gm = _cuda_backward_impl(grad_out, x, flow, metric, out, den, zmax, ctx.kind, ctx.eps_mode)
        return _as(gx, x.dtype), _as(gf, flow.dtype), _as(gm, metric.dtype) if ctx.has_metric else None, None, None


# torch.library registration, so that torch.compile sees one opaque op with a known shape.
@torch.library.custom_op("softsplat::splat_cuda", mutates_args=(), device_types="cuda")
def _splat_cuda(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor],
                kind: str, eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _cuda_forward_impl(x, flow, metric, kind, eps_mode)


@_splat_cuda.register_fake
def _(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor], kind: str,
      eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, c, h, w = x.shape
    acc_dtype = _acc_dtype(x, flow, metric)
    den = x.new_empty((n, 1, h, w) if kind != "sum" else (0,), dtype=acc_dtype)
    zmax = x.new_empty((n, 1, h, w) if kind == "soft" else (0,), dtype=acc_dtype)
    return x.new_empty((n, c, h, w)), den, zmax


@torch.library.custom_op("softsplat::splat_cuda_backward", mutates_args=(), device_types="cuda")
def _splat_cuda_backward(grad_out: torch.Tensor, x: torch.Tensor, flow: torch.Tensor,
                         metric: Optional[torch.Tensor], out: torch.Tensor, den: torch.Tensor,
                         zmax: torch.Tensor, kind: str,
                         eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gx, gf, gm = _cuda_backward_impl(grad_out, x, flow, metric, out, den, zmax, kind, eps_mode)
    if gm is None:
        gm = x.new_empty((0,))
    return _as(gx, x.dtype), _as(gf, flow.dtype), _as(gm, metric.dtype if metric is not None else x.dtype)


@_splat_cuda_backward.register_fake
def _(grad_out: torch.Tensor, x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor],
      out: torch.Tensor, den: torch.Tensor, zmax: torch.Tensor, kind: str,
      eps_mode: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # the kernels write contiguous gradients whatever the inputs' strides (e.g. channels_last features)
    gm = metric.new_empty(metric.shape) if metric is not None else x.new_empty((0,))
    return x.new_empty(x.shape), flow.new_empty(flow.shape), gm


def _setup_context(ctx: Any, inputs: Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], str, str],
                   output: Tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
    x, flow, metric, kind, eps_mode = inputs
    out, den, zmax = output
    ctx.kind = kind
    ctx.eps_mode = eps_mode
    ctx.has_metric = metric is not None
    ctx.save_for_backward(x, flow, metric, out, den, zmax)


def _backward(ctx: Any, grad_out: torch.Tensor, _grad_den: torch.Tensor,
              _grad_zmax: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], None, None]:
    x, flow, metric, out, den, zmax = ctx.saved_tensors
    gx, gf, gm = torch.ops.softsplat.splat_cuda_backward(
        grad_out, x, flow, metric if ctx.has_metric else None, out, den, zmax, ctx.kind, ctx.eps_mode)
    return gx, gf, (gm if ctx.has_metric else None), None, None


_splat_cuda.register_autograd(_backward, setup_context=_setup_context)


# ----------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------


def splat(x: torch.Tensor, flow: torch.Tensor, metric: Optional[torch.Tensor] = None,
          mode: str = "soft") -> torch.Tensor:
    """Forward-warp ``x`` by ``flow``; see the module docstring for conventions.

    CUDA tensors use the CuPy kernels when CuPy is installed, except under
    ``torch.use_deterministic_algorithms(True)``, where the deterministic PyTorch
    path runs instead (float atomics add in a varying order).
    """
    kind, eps_mode = _parse_mode(mode)
    _validate(x, flow, metric, kind)
    if x.numel() == 0:
        return x.new_zeros(x.shape)
    compiling = torch.compiler.is_compiling()
    if (x.is_cuda and not torch.are_deterministic_algorithms_enabled()
            and (_COMPILER.kernels_usable() if compiling else _kernels_usable())):
        if compiling:
            return torch.ops.softsplat.splat_cuda(x, flow, metric, kind, eps_mode)[0]
        if not torch.is_grad_enabled() or not (x.requires_grad or flow.requires_grad
                                               or (metric is not None and metric.requires_grad)):
            # nothing to differentiate: the kernels directly (autograd.Function.apply costs ~20 us of host time)
            return _cuda_forward_impl(x, flow, metric, kind, eps_mode, keep=False)[0]
        return _SplatFunction.apply(x, flow, metric, kind, eps_mode)
    if x.is_cuda and not compiling:
        warn_without_fast_kernels(x.device)  # the first CUDA call without CuPy says how to get the kernels
    return _splat_torch(x, flow, metric, kind, eps_mode)


NO_CUPY = ("softsplat runs on CUDA without CuPy, through its slower PyTorch path: pip install cupy-cuda12x "
           "or cupy-cuda13x (matching your CUDA) for the fast kernels")


def warn_without_fast_kernels(device: torch.device) -> None:
    """On a CUDA device without CuPy, say how to get the fast kernels (a RuntimeWarning: Python's default
    filter shows it once per process, since it is raised from this one line whoever calls: the engine at start,
    then splat on its first CUDA call)."""
    if device.type == "cuda" and not cuda_available():
        warnings.warn(NO_CUPY, RuntimeWarning, stacklevel=1)


def _kernels_usable() -> bool:
    """Whether the CuPy kernels run here; traced, a constant (``_COMPILER.kernels_usable``)."""
    return cupy_module() is not None


def softsplat(tenIn: torch.Tensor, tenFlow: torch.Tensor, tenMetric: Optional[torch.Tensor],
              strMode: str) -> torch.Tensor:
    """The published call style: ``softsplat(tenIn=..., tenFlow=..., tenMetric=..., strMode=...)``."""
    return splat(tenIn, tenFlow, tenMetric, strMode)



# ----------------------------------------------------------------------------
# torch.compile's marks, made when a trace first asks for them
# ----------------------------------------------------------------------------


def _index_add_outside_graphs(acc: torch.Tensor, targets: torch.Tensor, values: torch.Tensor) -> None:
    _index_add_eager(acc, targets, values)  # (the name looked up at each call)


def _compiler_mark(name: str) -> Any:
    """The attributes of ``_COMPILER``: ``index_add``, ``_index_add_eager`` never compiled
    (``torch.compiler.disable``), and ``kernels_usable``, ``_kernels_usable`` taken as a constant
    (``torch.compiler.assume_constant_result``). Both decorators import torch._dynamo, about 2 s of every process's
    start where almost none compiles; so they run when Dynamo first looks one of these names up, tracing a call
    (it reads a module's missing attribute with ``getattr``, which runs this, as Python does), and are kept."""
    if name == "index_add":
        value = torch.compiler.disable(_index_add_outside_graphs)
    elif name == "kernels_usable":
        value = torch.compiler.assume_constant_result(_kernels_usable)
    else:
        raise AttributeError(f"{__name__}._COMPILER has no attribute {name!r}")
    setattr(_COMPILER, name, value)
    return value


_COMPILER = ModuleType(f"{__name__}._COMPILER")  # not imported anywhere: its __getattr__ (PEP 562) makes the marks
_COMPILER.__getattr__ = _compiler_mark  # type: ignore[attr-defined]
