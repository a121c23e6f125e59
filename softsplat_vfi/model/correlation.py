"""Local correlation (cost volume) between two feature maps.

``correlation(one, two, radius)`` returns N x (2r+1)^2 x H x W: for each pixel p of
``one`` the mean over channels of one(p) * two(p + d), for displacements d with
|dx|, |dy| <= r, in row-major order of (dy, dx); ``two`` is zero outside the frame.

CPU (and the reference): PyTorch, one product and channel sum per displacement.
CUDA: CuPy kernels with their own backward. The forward runs one thread per pixel
holding all (2r+1)^2 sums in registers, a block per 16 x 16 tile with the other
map's window staged in shared memory; bf16/fp16 inputs are read and the output
written in their dtype, accumulated in float32.
"""

from __future__ import annotations

import functools
from typing import Any, Tuple

import torch
import torch.nn.functional as F

from .. import softsplat


def correlation_torch(one: torch.Tensor, two: torch.Tensor, radius: int = 3) -> torch.Tensor:
    """One product-and-channel-sum per displacement: on the CPU 3-5x faster than an einsum over
    unfolded windows, which copies every window into a batched matrix product."""
    _, c, h, w = one.shape
    padded = F.pad(two, (radius, radius, radius, radius))
    size = 2 * radius + 1
    costs = [(one * padded[:, :, dy:dy + h, dx:dx + w]).sum(1) for dy in range(size) for dx in range(size)]
    return torch.stack(costs, 1) / c


_SOURCE = r"""
// A thread's pixel: image n, offset p inside it, row y and column x.
struct Pixel { long long n, p; int y, x; };
__device__ __forceinline__ Pixel pixel_of(long long pix, int H, int W) {
    Pixel px;
    const long long hw = (long long)H * W;
    px.n = pix / hw;
    px.p = pix - px.n * hw;
    px.y = (int)(px.p / W);
    px.x = (int)(px.p - (long long)px.y * W);
    return px;
}

// One block per TILE x TILE pixels of one image, one thread per pixel holding its (2r+1)^2 sums in registers.
// The channels go CHUNK at a time: the block stages two's window around its tile (zero outside the frame) in
// shared memory, each thread its own CHUNK values of one, then every thread adds its products from shared memory.
// Each sum adds the channels in order, c = 0, 1, ..., as one thread per pixel reading global memory did.
// one, two and out are io_t: float, or bfloat16/float16 words (IO_KIND), accumulated in float32.
#define SPAN (TILE + 2 * RADIUS)
extern "C" __global__ void correlation_forward(const long long n_tiles, const int C, const int H, const int W,
                                               const io_t* __restrict__ one, const io_t* __restrict__ two,
                                               io_t* __restrict__ out) {
    __shared__ float window[CHUNK][SPAN][PITCH];
    const int tiles_x = (W + TILE - 1) / TILE, tiles_y = (H + TILE - 1) / TILE;
    const long long tile = blockIdx.x;
    const long long n = tile / ((long long)tiles_x * tiles_y);
    const int t = (int)(tile - n * tiles_x * tiles_y);
    const int y0 = (t / tiles_x) * TILE, x0 = (t % tiles_x) * TILE;
    const int ty = threadIdx.x / TILE, tx = threadIdx.x % TILE;
    const int y = y0 + ty, x = x0 + tx;
    const bool inside = y < H && x < W;
    const long long hw = (long long)H * W;
    const io_t* a = one + n * C * hw + (inside ? (long long)y * W + x : 0);
    const io_t* b = two + n * C * hw;
    float acc[SIZE * SIZE];
#pragma unroll
    for (int d = 0; d < SIZE * SIZE; ++d) acc[d] = 0.0f;
    for (int c0 = 0; c0 < C; c0 += CHUNK) {
        for (int i = threadIdx.x; i < CHUNK * SPAN * SPAN; i += TILE * TILE) {
            const int k = i / (SPAN * SPAN), r = i % (SPAN * SPAN);
            const int wy = r / SPAN, wx = r % SPAN;
            const int yy = y0 + wy - RADIUS, xx = x0 + wx - RADIUS;
            const bool in = c0 + k < C && yy >= 0 && yy < H && xx >= 0 && xx < W;
            window[k][wy][wx] = in ? (float)io_load(b[(long long)(c0 + k) * hw + (long long)yy * W + xx]) : 0.0f;
        }
        float av[CHUNK];
#pragma unroll
        for (int k = 0; k < CHUNK; ++k)
            av[k] = inside && c0 + k < C ? (float)io_load(a[(long long)(c0 + k) * hw]) : 0.0f;
        __syncthreads();
        // past the last channel av and the window are 0: those products add nothing
#pragma unroll
        for (int k = 0; k < CHUNK; ++k) {
#pragma unroll
            for (int dy = 0; dy < SIZE; ++dy) {
#pragma unroll
                for (int dx = 0; dx < SIZE; ++dx) acc[dy * SIZE + dx] += av[k] * window[k][ty + dy][tx + dx];
            }
        }
        __syncthreads();
    }
    if (!inside) return;
    const float inv = 1.0f / (float)C;
    io_t* o = out + n * (long long)(SIZE * SIZE) * hw + (long long)y * W + x;
#pragma unroll
    for (int d = 0; d < SIZE * SIZE; ++d) o[(long long)d * hw] = io_store(acc[d] * inv);
}

// grad_one(p) = sum_d g_d(p) two(p + d) / C
extern "C" __global__ void correlation_backward_one(const long long n_pix, const int C, const int H, const int W,
                                                    const float* __restrict__ two, const float* __restrict__ grad,
                                                    float* __restrict__ grad_one) {
    const long long pix = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= n_pix) return;
    const long long hw = (long long)H * W;
    const Pixel px = pixel_of(pix, H, W);
    const long long n = px.n, p = px.p;
    const int y = px.y, x = px.x;
    const float inv = 1.0f / (float)C;
    const float* g = grad + n * (long long)(SIZE * SIZE) * hw + p;
    float gp[SIZE * SIZE];
#pragma unroll
    for (int d = 0; d < SIZE * SIZE; ++d) gp[d] = g[(long long)d * hw] * inv;
    const float* b = two + n * C * hw;
    for (int c = 0; c < C; ++c) {
        const float* bc = b + (long long)c * hw;
        float s = 0.0f;
#pragma unroll
        for (int dy = 0; dy < SIZE; ++dy) {
            const int yy = y + dy - RADIUS;
#pragma unroll
            for (int dx = 0; dx < SIZE; ++dx) {
                const int xx = x + dx - RADIUS;
                if (yy >= 0 && yy < H && xx >= 0 && xx < W) s += gp[dy * SIZE + dx] * bc[(long long)yy * W + xx];
            }
        }
        grad_one[n * C * hw + (long long)c * hw + p] = s;
    }
}

// grad_two(q) = sum_d g_d(q - d) one(q - d) / C: the (2r+1)^2 gradients at q's sources are the same for every
// channel, so they are read once into registers (as backward_one reads its own), not once per channel
extern "C" __global__ void correlation_backward_two(const long long n_pix, const int C, const int H, const int W,
                                                    const float* __restrict__ one, const float* __restrict__ grad,
                                                    float* __restrict__ grad_two) {
    const long long pix = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= n_pix) return;
    const long long hw = (long long)H * W;
    const Pixel px = pixel_of(pix, H, W);
    const long long n = px.n, q = px.p;
    const int y = px.y, x = px.x;
    const float inv = 1.0f / (float)C;
    const float* g = grad + n * (long long)(SIZE * SIZE) * hw;
    float gq[SIZE * SIZE];
#pragma unroll
    for (int dy = 0; dy < SIZE; ++dy) {
        const int yy = y - dy + RADIUS;
#pragma unroll
        for (int dx = 0; dx < SIZE; ++dx) {
            const int xx = x - dx + RADIUS;
            const bool inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
            gq[dy * SIZE + dx] = inside ? g[(long long)(dy * SIZE + dx) * hw + (long long)yy * W + xx] * inv : 0.0f;
        }
    }
    const float* a = one + n * C * hw;
    for (int c = 0; c < C; ++c) {
        const float* ac = a + (long long)c * hw;
        float s = 0.0f;
#pragma unroll
        for (int dy = 0; dy < SIZE; ++dy) {
            const int yy = y - dy + RADIUS;
#pragma unroll
            for (int dx = 0; dx < SIZE; ++dx) {
                const int xx = x - dx + RADIUS;
                if (yy >= 0 && yy < H && xx >= 0 && xx < W) s += gq[dy * SIZE + dx] * ac[(long long)yy * W + xx];
            }
        }
        grad_two[n * C * hw + (long long)c * hw + q] = s;
    }
}
"""


_SIGNATURE = "qiiiPPP"  # every kernel: pixels (the forward: tiles), C, H, W, then three pointers (softsplat.launch)
_TILE = 16  # the forward's tiles: TILE x TILE pixels, one thread each
_SHARED_BYTES = 48 * 1024  # a block's static shared memory at most


def _forward_layout(radius: int) -> Tuple[int, int]:
    """(CHUNK, PITCH) of the forward kernel: its window's rows are PITCH floats apart, PITCH = 16 modulo 32, so the
    two tile rows a warp reads fall in different shared-memory banks; CHUNK channels are staged at once, 8 where
    they fit in a block's shared memory."""
    span = _TILE + 2 * radius
    pitch = span + (16 - span) % 32
    chunk = 8
    while chunk > 1 and chunk * span * pitch * 4 > _SHARED_BYTES:
        chunk //= 2
    return chunk, pitch


@functools.lru_cache(maxsize=32)
def _kernels(device_index: int, radius: int, io_kind: int = 0) -> Tuple[Any, Any, Any]:
    """The three kernels for one device and radius; the forward reads and writes float32 (io_kind 0), bfloat16 (1)
    or float16 (2), the backward ones float32."""
    cupy = softsplat.cupy_module()
    size = 2 * radius + 1
    chunk, pitch = _forward_layout(radius)
    defines = (f"#define RADIUS {radius}\n#define SIZE {size}\n#define TILE {_TILE}\n#define CHUNK {chunk}\n"
               f"#define PITCH {pitch}\n#define IO_KIND {io_kind}\ntypedef float scalar_t;\n")
    with cupy.cuda.Device(device_index):
        module = cupy.RawModule(code=defines + softsplat.IO_SOURCE + _SOURCE, options=("-std=c++17",))
        return tuple(module.get_function(name) for name in
                     ("correlation_forward", "correlation_backward_one", "correlation_backward_two"))


class _CorrelationFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, one: torch.Tensor, two: torch.Tensor, radius: int) -> torch.Tensor:
        n, c, h, w = one.shape
        dev = one.device.index  # a CUDA tensor's device always carries its index
        # bfloat16/float16 pairs are read and written as they are, without float32 copies
        native = one.dtype == two.dtype and one.dtype in softsplat.IO_KINDS
        dtype = one.dtype if native else torch.float32
        a = one.to(dtype).contiguous()
        b = two.to(dtype).contiguous()
        out = torch.empty((n, (2 * radius + 1) ** 2, h, w), device=one.device, dtype=dtype)
        forward, _, _ = _kernels(dev, radius, softsplat.IO_KINDS.get(dtype, 0))
        tiles = n * -(-h // _TILE) * -(-w // _TILE)
        softsplat.launch(forward, tiles * _TILE * _TILE, _SIGNATURE,
                         (tiles, c, h, w, a.data_ptr(), b.data_ptr(), out.data_ptr()), dev, threads=_TILE * _TILE)
        ctx.save_for_backward(a, b)
        ctx.radius, ctx.dtypes = radius, (one.dtype, two.dtype)
        return out.to(one.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, None]:
        a, b = (t.float().contiguous() for t in ctx.saved_tensors)
        n, c, h, w = a.shape
        dev = a.device.index
        g = grad.float().contiguous()
        grad_one = torch.empty_like(a)
        grad_two = torch.empty_like(b)
        _, backward_one, backward_two = _kernels(dev, ctx.radius)
        count = n * h * w
        softsplat.launch(backward_one, count, _SIGNATURE, (count, c, h, w, b.data_ptr(), g.data_ptr(),
                                                            grad_one.data_ptr()), dev)
        softsplat.launch(backward_two, count, _SIGNATURE, (count, c, h, w, a.data_ptr(), g.data_ptr(),
                                                            grad_two.data_ptr()), dev)
        return grad_one.to(ctx.dtypes[0]), grad_two.to(ctx.dtypes[1]), None


def correlation(one: torch.Tensor, two: torch.Tensor, radius: int = 3) -> torch.Tensor:
    if one.shape != two.shape:
        raise ValueError(f"correlation needs equal shapes, got {tuple(one.shape)} and {tuple(two.shape)}")
    if one.dim() != 4:
        raise ValueError(f"correlation needs N x C x H x W tensors, got shape {tuple(one.shape)}")
    if (one.is_cuda and not torch.compiler.is_compiling() and softsplat.cuda_available()
            and not torch.are_deterministic_algorithms_enabled()):
        return _CorrelationFunction.apply(one, two, radius)
    return correlation_torch(one, two, radius)
