"""Local correlation (cost volume) between two feature maps.

``correlation(one, two, radius)`` returns N x (2r+1)^2 x H x W: for each pixel p of
``one`` the mean over channels of one(p) * two(p + d), for displacements d with
|dx|, |dy| <= r, in row-major order of (dy, dx); ``two`` is zero outside the frame.

CPU (and the reference): PyTorch, one product and channel sum per displacement.
CUDA: a CuPy kernel, one thread per pixel holding all (2r+1)^2 sums in registers,
with its own backward; fp16/bf16 inputs are computed in float32 and returned in
their dtype.
"""

from __future__ import annotations

import functools
from typing import Any, Tuple

import torch
import torch.nn.functional as F

import softsplat


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

extern "C" __global__ void correlation_forward(const long long n_pix, const int C, const int H, const int W,
                                               const float* __restrict__ one, const float* __restrict__ two,
                                               float* __restrict__ out) {
    const long long pix = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= n_pix) return;
    const long long hw = (long long)H * W;
    const Pixel px = pixel_of(pix, H, W);
    const long long n = px.n, p = px.p;
    const int y = px.y, x = px.x;
    float acc[SIZE * SIZE];
#pragma unroll
    for (int d = 0; d < SIZE * SIZE; ++d) acc[d] = 0.0f;
    const float* a = one + n * C * hw + p;
    const float* b = two + n * C * hw;
    for (int c = 0; c < C; ++c) {
        const float av = a[(long long)c * hw];
        const float* bc = b + (long long)c * hw;
#pragma unroll
        for (int dy = 0; dy < SIZE; ++dy) {
            const int yy = y + dy - RADIUS;
#pragma unroll
            for (int dx = 0; dx < SIZE; ++dx) {
                const int xx = x + dx - RADIUS;
                if (yy >= 0 && yy < H && xx >= 0 && xx < W) acc[dy * SIZE + dx] += av * bc[(long long)yy * W + xx];
            }
        }
    }
    const float inv = 1.0f / (float)C;
    float* o = out + n * (long long)(SIZE * SIZE) * hw + p;
#pragma unroll
    for (int d = 0; d < SIZE * SIZE; ++d) o[(long long)d * hw] = acc[d] * inv;
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


_SIGNATURE = "qiiiPPP"  # every kernel: pixels, C, H, W, then three pointers (see softsplat.launch)


@functools.lru_cache(maxsize=16)
def _kernels(device_index: int, radius: int) -> Tuple[Any, Any, Any]:
    cupy = softsplat.cupy_module()
    size = 2 * radius + 1
    with cupy.cuda.Device(device_index):
        module = cupy.RawModule(code=f"#define RADIUS {radius}\n#define SIZE {size}\n" + _SOURCE,
                                options=("-std=c++17",))
        return tuple(module.get_function(name) for name in
                     ("correlation_forward", "correlation_backward_one", "correlation_backward_two"))


class _CorrelationFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, one: torch.Tensor, two: torch.Tensor, radius: int) -> torch.Tensor:
        n, c, h, w = one.shape
        dev = one.device.index  # a CUDA tensor's device always carries its index
        a = one.float().contiguous()
        b = two.float().contiguous()
        out = torch.empty((n, (2 * radius + 1) ** 2, h, w), device=one.device, dtype=torch.float32)
        forward, _, _ = _kernels(dev, radius)
        count = n * h * w
        softsplat.launch(forward, count, _SIGNATURE, (count, c, h, w, a.data_ptr(), b.data_ptr(), out.data_ptr()), dev)
        ctx.save_for_backward(a, b)
        ctx.radius, ctx.dtypes = radius, (one.dtype, two.dtype)
        return out.to(one.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, None]:
        a, b = ctx.saved_tensors
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
