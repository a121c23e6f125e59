"""Properties of the operator on the CPU (PyTorch path), and CUDA against it."""

import pytest
import torch

from softsplat_vfi import softsplat

MODES = ["sum", "avg", "linear", "soft"]


def _inputs(n=2, c=3, h=6, w=9, dtype=torch.float64, device="cpu", scale=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, c, h, w, generator=g, dtype=torch.float64)
    # keep flows away from integer positions so finite differences don't cross a floor()
    flow = torch.randn(n, 2, h, w, generator=g, dtype=torch.float64) * scale
    frac = flow - flow.floor()
    flow = flow.floor() + frac.clamp(0.15, 0.85)
    metric = torch.randn(n, 1, h, w, generator=g, dtype=torch.float64)
    return x.to(device, dtype), flow.to(device, dtype), metric.to(device, dtype)


def _metric_for(mode, metric):
    return metric if mode.split("-")[0] in ("linear", "soft") else None


@pytest.mark.parametrize("mode", MODES)
def test_zero_flow_is_identity(mode):
    x, flow, metric = _inputs(dtype=torch.float32)
    out = softsplat.splat(x, torch.zeros_like(flow), _metric_for(mode, metric * 1e4), mode)
    # avg/linear/soft divide by the weight plus 1e-7
    torch.testing.assert_close(out, x, rtol=1e-5, atol=1e-6)


def test_integer_flow_is_exact_shift():
    x, flow, _ = _inputs(c=4, dtype=torch.float32)
    flow = torch.zeros_like(flow)
    flow[:, 0] = 2.0
    flow[:, 1] = -1.0
    out = softsplat.splat(x, flow, None, "sum")
    expected = torch.zeros_like(x)
    expected[:, :, :-1, 2:] = x[:, :, 1:, :-2]
    assert torch.equal(out, expected)


def test_sum_conserves_mass_inside_the_frame():
    x, flow, _ = _inputs(h=16, w=16, scale=0.3)
    # small flow on an interior region: every contribution lands inside
    x[:, :, :2] = 0
    x[:, :, -2:] = 0
    x[:, :, :, :2] = 0
    x[:, :, :, -2:] = 0
    out = softsplat.splat(x, flow.clamp(-0.9, 0.9), None, "sum")
    torch.testing.assert_close(out.sum(dim=(2, 3)), x.sum(dim=(2, 3)))


def test_soft_is_invariant_to_metric_offset():
    x, flow, metric = _inputs()
    a = softsplat.splat(x, flow, metric, "soft-zeroeps")
    b = softsplat.splat(x, flow, metric + 50.0, "soft-zeroeps")
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("magnitude", [1e2, 1e3, 1e4])
def test_soft_is_finite_and_correct_for_large_metrics(magnitude):
    x, flow, metric = _inputs(dtype=torch.float32)
    out = softsplat.splat(x, flow, metric * magnitude, "soft")
    assert torch.isfinite(out).all()
    # reference in float64 with the metric scaled down: exp(m) itself would overflow,
    # so compare against a hand-written per-target softmax instead
    ref = _softmax_reference(x.double(), flow.double(), (metric * magnitude).double())
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-5)


def _softmax_reference(x, flow, metric):
    """Loop-based softmax splatting with a per-target max shift (independent of the library)."""
    n, c, h, w = x.shape
    out = torch.zeros(n, c, h, w, dtype=torch.float64)
    entries = {}
    for b in range(n):
        for y in range(h):
            for xx in range(w):
                u, v = flow[b, 0, y, xx].item(), flow[b, 1, y, xx].item()
                gx, gy = xx + u, y + v
                x0, y0 = int(torch.floor(torch.tensor(gx))), int(torch.floor(torch.tensor(gy)))
                fx, fy = gx - x0, gy - y0
                for dx, dy, wt in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)),
                                   (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
                    tx, ty = x0 + dx, y0 + dy
                    if 0 <= tx < w and 0 <= ty < h and wt > 0:
                        entries.setdefault((b, ty, tx), []).append((wt, metric[b, 0, y, xx].item(), x[b, :, y, xx]))
    for (b, ty, tx), items in entries.items():
        z = max(m for _, m, _ in items)
        num = sum(wt * torch.exp(torch.tensor(m - z, dtype=torch.float64)) * val for wt, m, val in items)
        den = sum(wt * torch.exp(torch.tensor(m - z, dtype=torch.float64)) for wt, m, _ in items)
        out[b, :, ty, tx] = num / (den + 1e-7)
    return out


def test_nonfinite_flow_is_dropped():
    x, flow, metric = _inputs(dtype=torch.float32)
    flow[0, 0, 1, 1] = float("nan")
    flow[1, 1, 2, 3] = float("inf")
    for mode in MODES:
        out = softsplat.splat(x, flow, _metric_for(mode, metric), mode)
        assert torch.isfinite(out).all(), mode
    keep = torch.ones_like(x)
    keep[0, :, 1, 1] = 0
    keep[1, :, 2, 3] = 0
    clean = flow.clone()
    clean[0, :, 1, 1] = 0
    clean[1, :, 2, 3] = 0
    torch.testing.assert_close(softsplat.splat(x, flow, None, "sum"), softsplat.splat(x * keep, clean, None, "sum"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_is_preserved(dtype):
    x, flow, metric = _inputs(dtype=dtype)
    out = softsplat.splat(x, flow, metric, "soft")
    assert out.dtype == dtype
    ref = softsplat.splat(x.double(), flow.double(), metric.double(), "soft")
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", MODES + ["soft-zeroeps", "soft-clipeps", "avg-zeroeps", "linear-clipeps"])
def test_gradcheck(mode):
    x, flow, metric = _inputs(n=2, c=2, h=4, w=5)
    # non-contiguous inputs: transposed views of contiguous storage (flow and metric too)
    x = x.transpose(2, 3).contiguous().transpose(2, 3).requires_grad_()
    flow = flow.transpose(2, 3).contiguous().transpose(2, 3).requires_grad_()
    metric = metric.abs().add(0.5) if mode.startswith("linear") else metric
    metric = metric.transpose(2, 3).contiguous().transpose(2, 3).requires_grad_()
    inputs = (x, flow, metric) if _metric_for(mode, metric) is not None else (x, flow)
    assert not x.is_contiguous() and not flow.is_contiguous() and not metric.is_contiguous()
    assert torch.autograd.gradcheck(lambda *t: softsplat.splat(*t, None, mode) if len(t) == 2
                                    else softsplat.splat(*t, mode), inputs)


def test_published_call_style():
    x, flow, metric = _inputs(dtype=torch.float32)
    a = softsplat.softsplat(tenIn=x, tenFlow=flow, tenMetric=metric, strMode="soft")
    b = softsplat.splat(x, flow, metric, mode="soft")
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(x=torch.rand(3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=None, mode="sum"), "x must be"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 6), metric=None, mode="sum"), "flow must be"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=None, mode="soft"), "metric is required"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=torch.rand(1, 1, 4, 5), mode="avg"),
         "metric must be None"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=torch.rand(1, 2, 4, 5), mode="soft"),
         "metric must be"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=None, mode="max"), "unknown mode"),
        (dict(x=torch.rand(1, 3, 4, 5), flow=torch.rand(1, 2, 4, 5), metric=None, mode="sum-foo"), "unknown mode"),
        (dict(x=torch.ones(1, 3, 4, 5, dtype=torch.long), flow=torch.rand(1, 2, 4, 5), metric=None, mode="sum"),
         "floating-point"),
    ],
)
def test_bad_input_raises_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        softsplat.splat(**kwargs)


def test_deterministic_mode_is_bitwise_repeatable():
    x, flow, metric = _inputs(n=1, c=3, h=32, w=32, dtype=torch.float32, scale=4.0)
    with _deterministic():
        a = softsplat.splat(x, flow, metric, "soft")
        b = softsplat.splat(x, flow, metric, "soft")
    assert torch.equal(a, b)


class _deterministic:
    def __enter__(self):
        self.was = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.was)


# ---------------------------------------------------------------- CUDA ---

def _devices():
    if not torch.cuda.is_available():
        return ["cuda"]
    return [f"cuda:{i}" for i in range(min(torch.cuda.device_count(), 2))]


@pytest.mark.cuda
def test_cuda_fast_path_is_available():
    assert softsplat.cuda_available(), "CuPy did not import: install cupy-cudaXXx"


@pytest.mark.cuda
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("mode", MODES + ["soft-zeroeps", "soft-clipeps", "avg-zeroeps"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_matches_pytorch(device, mode, dtype):
    for seed in range(3):
        x, flow, metric = _inputs(n=2, c=5, h=37, w=53, scale=6.0, seed=seed)
        metric = metric * 30
        if mode.startswith("linear"):
            metric = metric.abs() + 0.1
        args = [t.to(device, dtype).requires_grad_() for t in (x, flow, metric)]
        ref_args = [t.detach().double().requires_grad_() for t in args]
        m = 2 if _metric_for(mode, metric) is not None else None
        out = softsplat.splat(args[0], args[1], args[m] if m else None, mode)
        ref = softsplat._splat_torch(ref_args[0], ref_args[1], ref_args[m] if m else None, *softsplat._parse_mode(mode))
        assert out.dtype == dtype
        tol = 2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
        torch.testing.assert_close(out.double().cpu(), ref.detach().cpu(), rtol=tol, atol=tol)
        grad = torch.randn_like(ref)
        out.backward(grad.to(device, dtype))
        ref.backward(grad)
        for name, a, b in zip(("x", "flow", "metric"), args, ref_args):
            if b.grad is None:
                assert a.grad is None or not a.grad.any(), name
                continue
            assert a.grad.dtype == dtype
            scale = b.grad.abs().max().item() + 1e-6
            err = (a.grad.double().cpu() - b.grad.cpu()).abs().max().item() / scale
            assert err < (3e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4), (name, err)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["soft", "sum", "avg-zeroeps"])
def test_cuda_half_input_with_float_flow(dtype, mode):
    """The network's case: half-precision features, float32 flow and metric. The forward kernels read and
    write the half type themselves; the result must equal splatting the float32 copy, rounded once."""
    x, flow, metric = _inputs(n=2, c=70, h=41, w=67, scale=6.0, seed=3)
    x = x.to("cuda", dtype).transpose(2, 3).contiguous().transpose(2, 3)  # non-contiguous, as channels_last
    flow, metric = flow.to("cuda", torch.float32), metric.to("cuda", torch.float32) * 10
    m = metric if _metric_for(mode, metric) is not None else None
    out = softsplat.splat(x, flow, m, mode)
    assert out.dtype == dtype and out.shape == x.shape
    ref = softsplat.splat(x.float(), flow, m, mode).to(dtype)
    # the float32 sums differ only in the order of their atomic adds: at most one rounding step apart
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.float(), ref.float(), rtol=2 * eps, atol=1e-6)
    assert torch.isfinite(out).all()
    # the backward reads x, the output and its gradient in the half type too, and writes x's gradient in it:
    # within a few rounding steps of the float32 path's gradients (whose output was not rounded)
    args = [x.detach().requires_grad_(), flow.detach().requires_grad_(), m.detach().requires_grad_() if m is not None
            else None]
    refs = [x.detach().float().requires_grad_(), flow.detach().requires_grad_(),
            m.detach().requires_grad_() if m is not None else None]
    grad = torch.randn(x.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    softsplat.splat(args[0], args[1], args[2], mode).backward(grad.to(dtype))
    softsplat.splat(refs[0], refs[1], refs[2], mode).backward(grad.to(dtype).float())
    assert args[0].grad.dtype == dtype
    for name, a, b in zip(("x", "flow", "metric"), args, refs):
        if a is None:
            continue
        err = (a.grad.float() - b.grad).abs().max().item() / (b.grad.abs().max().item() + 1e-6)
        assert err < 3e-2, (name, err)


@pytest.mark.cuda
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("mode", MODES + ["soft-zeroeps", "linear-clipeps"])
def test_cuda_gradcheck(device, mode):
    x, flow, metric = [t.to(device).requires_grad_() for t in _inputs(n=2, c=2, h=4, w=5)]
    if mode.startswith("linear"):
        metric = metric.detach().abs().add(0.5).requires_grad_()
    if _metric_for(mode, metric) is not None:
        assert torch.autograd.gradcheck(lambda a, b, c: softsplat.splat(a, b, c, mode), (x, flow, metric))
    else:
        assert torch.autograd.gradcheck(lambda a, b: softsplat.splat(a, b, None, mode), (x, flow))


@pytest.mark.cuda
def test_cuda_large_metric_is_finite():
    x, flow, metric = _inputs(n=1, c=3, h=64, w=64, dtype=torch.float32, device="cuda", scale=8.0)
    for magnitude in (100.0, 1e4):
        out = softsplat.splat(x, flow, metric * magnitude, "soft")
        assert torch.isfinite(out).all()


@pytest.mark.cuda
def test_cuda_deterministic_mode_is_bitwise_repeatable():
    x, flow, metric = _inputs(n=2, c=8, h=64, w=96, dtype=torch.float32, device="cuda", scale=2.0)
    with _deterministic():
        a = softsplat.splat(x, flow, metric, "soft")
        b = softsplat.splat(x, flow, metric, "soft")
    assert torch.equal(a, b)


@pytest.mark.cuda
def test_cuda_compiles_with_torch_compile():
    x, flow, metric = _inputs(n=1, c=3, h=16, w=24, dtype=torch.float32, device="cuda")
    fn = torch.compile(lambda a, b, c: softsplat.splat(a, b, c, "soft") * 2, fullgraph=True)
    torch.testing.assert_close(fn(x, flow, metric), softsplat.splat(x, flow, metric, "soft") * 2)


@pytest.mark.cuda
def test_cuda_compiled_backward_with_channels_last_input():
    """Training compiles forward and backward through the custom ops; the fake kernels must describe the
    real outputs (contiguous gradients, also for channels_last features), or Inductor's stride checks fail."""
    x, flow, metric = _inputs(n=2, c=6, h=16, w=24, dtype=torch.float32, device="cuda", scale=3.0)
    x = x.contiguous(memory_format=torch.channels_last)

    def loss(a, b, c):
        return (softsplat.splat(a, b, c, "soft") * torch.linspace(0, 1, 24, device="cuda")).sum()

    compiled = torch.compile(loss, fullgraph=True)
    grads = []
    for fn in (compiled, loss):
        args = [t.detach().clone().requires_grad_() for t in (x, flow, metric)]
        fn(*args).backward()
        grads.append([a.grad for a in args])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.cuda
def test_cuda_uses_current_stream():
    x, flow, metric = _inputs(n=1, c=3, h=128, w=128, dtype=torch.float32, device="cuda", scale=8.0)
    ref = softsplat.splat(x, flow, metric, "soft")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = softsplat.splat(x, flow, metric, "soft")
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(out, ref)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["soft", "avg"])
def test_cuda_graph_capture_replays_the_same_result(mode):
    """A CUDA graph records every launch's arguments at capture time (run.py's graph runtime relies on it):
    replays on new inputs copied into the captured tensors must match eager calls, launch by launch."""
    x, flow, metric = _inputs(n=2, c=5, h=24, w=40, dtype=torch.float32, device="cuda", scale=4.0)
    m = metric if mode == "soft" else None
    static = [t.clone() for t in (x, flow, metric)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the default stream, as torch.cuda.graph expects
        softsplat.splat(static[0], static[1], static[2] if m is not None else None, mode)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = softsplat.splat(static[0], static[1], static[2] if m is not None else None, mode)
    for seed in (7, 8):
        fresh = _inputs(n=2, c=5, h=24, w=40, dtype=torch.float32, device="cuda", scale=4.0, seed=seed)
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        ref = softsplat.splat(fresh[0], fresh[1], fresh[2] if m is not None else None, mode)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["soft", "avg", "sum", "linear-clipeps"])
@pytest.mark.parametrize("case", ["many_channels", "converging", "far_and_nan", "batch_of_small",
                                  "integer_positions"])
def test_cuda_forward_edge_cases(mode, case):
    """Many channels, thousands of sources converging on a few targets, far and non-finite flows
    (dropped), a batch of tiny images, sources at integer positions (zero bilinear weights, which must not
    count in Z_max: with metrics of +-1e3 a wrong maximum would zero a target): CUDA against the oracle."""
    shapes = {"many_channels": (1, 70, 40, 70), "converging": (2, 3, 64, 96), "far_and_nan": (2, 4, 33, 65),
              "batch_of_small": (5, 2, 7, 9), "integer_positions": (2, 3, 31, 47)}
    n, c, h, w = shapes[case]
    x, flow, metric = _inputs(n=n, c=c, h=h, w=w, scale=6.0, seed=3)
    if case == "converging":  # every source lands within a few pixels of one point
        ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64),
                                indexing="ij")
        flow = torch.stack([40.3 - xs, 20.7 - ys]).expand(n, 2, h, w) + 0.8 * torch.rand(n, 2, h, w)
    if case == "far_and_nan":
        flow = flow.clone()
        flow[:, 0, ::3] = 1e6
        flow[:, 1, 1::4] = -1e30
        flow[:, 0, :, ::5] = float("nan")
        flow[:, 1, :, 1::7] = float("inf")
    if case == "integer_positions":  # whole pixels in x, y or both; a quarter stay fractional
        gen = torch.Generator().manual_seed(5)
        whole = torch.randint(0, 4, (n, 1, h, w), generator=gen)
        rounded = flow.round()
        flow = torch.cat([torch.where(whole % 2 == 1, rounded[:, :1], flow[:, :1]),
                          torch.where(whole >= 2, rounded[:, 1:], flow[:, 1:])], 1)
        metric = metric * 1e3
    if mode.startswith("linear"):
        metric = metric.abs() + 0.1
    kind, eps_mode = softsplat._parse_mode(mode)
    m = metric if kind in ("linear", "soft") else None
    ref = softsplat._splat_torch(x, flow, m, kind, eps_mode)
    out = softsplat.splat(x.cuda().float(), flow.cuda().float(), m.cuda().float() if m is not None else None, mode)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-4, atol=1e-4)
