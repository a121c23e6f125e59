"""Session 27's check of correlation_backward_two (model/correlation.py), to run on a GPU machine from the repository
root: ``PYTHONPATH=. python3 docs/journal/raw/corr_ab_s27.py``. Compiles the kernel before the change (its text below, as it
stood before session 27's change) beside the current one, checks both against PyTorch's autograd on the CPU
reference, and times them side by side in one process at the F2 network's five cost-volume shapes at batch 32
(256-px crops, encoder widths 48, 80, 128, 192, 256 at 1/2 ... 1/32 resolution)."""

import torch

import softsplat
from model import correlation as corr

OLD = r'''
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
                if (yy >= 0 && yy < H && xx >= 0 && xx < W) {
                    const long long src = (long long)yy * W + xx;
                    s += g[(long long)(dy * SIZE + dx) * hw + src] * ac[src];
                }
            }
        }
        grad_two[n * C * hw + (long long)c * hw + q] = s * inv;
    }
}
'''


def kernel(source: str, radius: int):
    cupy = softsplat._cupy()
    module = cupy.RawModule(code=f"#define RADIUS {radius}\n#define SIZE {2 * radius + 1}\n" + source,
                            options=("-std=c++17",))
    return module.get_function("correlation_backward_two")


def run(fn, a, g, out):
    n, c, h, w = a.shape
    count = n * h * w
    softsplat._launch(fn, count, corr._SIGNATURE, (count, c, h, w, a.data_ptr(), g.data_ptr(), out.data_ptr()),
                      a.device.index)


def main() -> None:
    radius = 3
    head = corr._SOURCE[:corr._SOURCE.index("// grad_two(q)")]
    new, old = kernel(corr._SOURCE, radius), kernel(head + OLD, radius)
    # correctness on a small odd shape, against the CPU reference's autograd
    gen = torch.Generator().manual_seed(0)
    one, two = torch.randn(2, 2, 24, 33, 47, generator=gen, dtype=torch.float64)
    two.requires_grad_()
    ref = corr.correlation_torch(one, two, radius)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    for name, fn in (("old", old), ("new", new)):
        out = torch.empty(2, 24, 33, 47, device="cuda")
        run(fn, one.float().cuda(), grad.float().cuda().contiguous(), out)
        err = (out.double().cpu() - two.grad).abs().max().item()
        print(f"{name}: max abs error against the CPU reference {err:.2e}")
    # timing at F2's shapes, both kernels in this one process, alternating
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    total = {"old": 0.0, "new": 0.0}
    for c, size in ((48, 128), (80, 64), (128, 32), (192, 16), (256, 8)):
        a = torch.randn(32, c, size, size, device="cuda")
        g = torch.randn(32, (2 * radius + 1) ** 2, size, size, device="cuda")
        out = torch.empty_like(a)
        times = {}
        for name, fn in (("old", old), ("new", new)) * 2:
            for _ in range(3):
                run(fn, a, g, out)
            start.record()
            for _ in range(20):
                run(fn, a, g, out)
            stop.record()
            stop.synchronize()
            times[name] = min(times.get(name, 1e9), start.elapsed_time(stop) / 20)
        total["old"] += times["old"]
        total["new"] += times["new"]
        print(f"C {c} {size}x{size}: old {times['old']:.3f} ms, new {times['new']:.3f} ms")
    print(f"all five: old {total['old']:.3f} ms, new {total['new']:.3f} ms, {total['old'] / total['new']:.2f}x")


if __name__ == "__main__":
    main()
