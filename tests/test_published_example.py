"""The published softmax-splatting README's example runs unchanged against this project (on the CPU here).

The example reads two frames with OpenCV, the flow with ``run.read_flo``, builds a metric with ``run.backwarp``
and splats in the modes 'sum', 'avg', 'linear' and 'soft' for eleven t from 0 to 1. The test writes its own
frames and .flo file (a smooth texture moved by a known flow), so it needs nothing outside the repository.
"""

import warnings

import cv2
import numpy
import numpy as np
import pytest
import torch

import run
from softsplat_vfi import softsplat

H, W = 40, 56
SHIFT = (3.0, 2.0)  # x, y in pixels: the content of frame two is frame one moved by this


def _write_flo(path, flow: np.ndarray) -> None:
    """Middlebury .flo: float32 tag 202021.25, int32 width and height, then H x W x 2 float32 (x, y)."""
    h, w, _ = flow.shape
    with open(path, "wb") as f:
        f.write(np.array([202021.25], "<f4").tobytes())
        f.write(np.array([w, h], "<i4").tobytes())
        f.write(flow.astype("<f4").tobytes())


@pytest.fixture
def example(tmp_path, monkeypatch):
    """images/one.png, images/two.png and images/flow.flo as the example expects them, in a scratch folder."""
    yy, xx = np.mgrid[0:H + 8, 0:W + 8].astype(np.float32)
    texture = np.stack([np.sin(xx / 3.1), np.cos(yy / 4.3), np.sin((xx + yy) / 5.7)], axis=2) * 0.4 + 0.5
    one = texture[4:4 + H, 4:4 + W]
    dx, dy = int(SHIFT[0]), int(SHIFT[1])
    two = texture[4 - dy:4 - dy + H, 4 - dx:4 - dx + W]  # two(p + shift) = one(p)
    flow = np.broadcast_to(np.array(SHIFT, np.float32), (H, W, 2)).copy()
    flow[:, :, 0] += 0.25 * np.sin(xx[:H, :W] / 9.0)  # not constant: read_flo must keep every value in place
    images = tmp_path / "images"
    images.mkdir()
    cv2.imwrite(str(images / "one.png"), np.rint(one * 255).astype(np.uint8))
    cv2.imwrite(str(images / "two.png"), np.rint(two * 255).astype(np.uint8))
    _write_flo(images / "flow.flo", flow)
    monkeypatch.chdir(tmp_path)
    return flow


def test_the_published_example_runs_in_all_four_modes(example):
    # the published example's lines, with .cuda() left out (the CPU here)
    tenOne = torch.FloatTensor(numpy.ascontiguousarray(cv2.imread(filename='./images/one.png', flags=-1).transpose(2, 0, 1)[None, :, :, :].astype(numpy.float32) * (1.0 / 255.0)))  # noqa: E501
    tenTwo = torch.FloatTensor(numpy.ascontiguousarray(cv2.imread(filename='./images/two.png', flags=-1).transpose(2, 0, 1)[None, :, :, :].astype(numpy.float32) * (1.0 / 255.0)))  # noqa: E501
    tenFlow = torch.FloatTensor(numpy.ascontiguousarray(run.read_flo('./images/flow.flo').transpose(2, 0, 1)[None, :, :, :]))  # noqa: E501

    tenMetric = torch.nn.functional.l1_loss(input=tenOne, target=run.backwarp(tenIn=tenTwo, tenFlow=tenFlow), reduction='none').mean([1], True)  # noqa: E501

    outputs = {}
    for intTime, fltTime in enumerate(numpy.linspace(0.0, 1.0, 11).tolist()):
        tenSummation = softsplat.softsplat(tenIn=tenOne, tenFlow=tenFlow * fltTime, tenMetric=None, strMode='sum')
        tenAverage = softsplat.softsplat(tenIn=tenOne, tenFlow=tenFlow * fltTime, tenMetric=None, strMode='avg')
        tenLinear = softsplat.softsplat(tenIn=tenOne, tenFlow=tenFlow * fltTime, tenMetric=(0.3 - tenMetric).clip(0.001, 1.0), strMode='linear')  # noqa: E501
        tenSoftmax = softsplat.softsplat(tenIn=tenOne, tenFlow=tenFlow * fltTime, tenMetric=(-20.0 * tenMetric).clip(-20.0, 20.0), strMode='soft')  # noqa: E501
        outputs[intTime] = (tenSummation, tenAverage, tenLinear, tenSoftmax)

    # what the example shows: its inputs as written, and frames that look like frame one moved along the flow
    np.testing.assert_array_equal(run.read_flo("./images/flow.flo"), example)
    assert tenMetric.shape == (1, 1, H, W)
    # backwarp brings frame two back onto frame one where the flow is the plain shift (the rows where the sine
    # term is small), so the metric is small there; the texture itself varies by far more
    assert float(tenMetric[0, 0, 4:-4, 4:-4].median()) < 0.02 < float((tenOne - tenTwo).abs().mean())
    for outs in outputs.values():
        for mode, out in zip(("sum", "avg", "linear", "soft"), outs):
            assert out.shape == (1, 3, H, W) and out.dtype == torch.float32 and torch.isfinite(out).all(), mode
    # t = 0: no motion, every mode gives frame one back ('linear' to its normaliser's 1e-7 over a metric >= 0.001)
    torch.testing.assert_close(outputs[0][0], tenOne, atol=1e-6, rtol=0)
    for out in outputs[0][1:]:
        torch.testing.assert_close(out, tenOne, atol=0, rtol=2e-4)
    # 'sum' moves the frame's mass (only what crosses the border is lost); the normalised modes stay in range
    inner = (slice(None), slice(None), slice(8, -8), slice(8, -8))
    for time in (5, 10):
        summed, average, linear, soft = outputs[time]
        assert 0.9 * float(tenOne.sum()) < float(summed.sum()) <= float(tenOne.sum()) * (1 + 1e-5)
        assert 0.0 <= float(average.min()) and float(average.max()) <= 1.0 + 1e-5
        assert float(soft[inner].min()) >= 0.0 and float(soft[inner].max()) <= 1.0 + 1e-5
        # at t = 1 frame one lands on frame two (bilinear splatting blurs a little: compare away from the edges)
        if time == 10:
            assert float((soft - tenTwo)[inner].abs().mean()) < 0.03
            assert float((linear - tenTwo)[inner].abs().mean()) < 0.03


def _published_backwarp(tenIn, tenFlow):
    """The published run.py's backwarp (grid built with linspace, align_corners=True, zeros outside)."""
    tenHor = torch.linspace(-1.0, 1.0, tenFlow.shape[3]).view(1, 1, 1, -1).repeat(1, 1, tenFlow.shape[2], 1)
    tenVer = torch.linspace(-1.0, 1.0, tenFlow.shape[2]).view(1, 1, -1, 1).repeat(1, 1, 1, tenFlow.shape[3])
    grid = torch.cat([tenHor, tenVer], 1)
    tenFlow = torch.cat([tenFlow[:, 0:1] / ((tenIn.shape[3] - 1.0) / 2.0),
                         tenFlow[:, 1:2] / ((tenIn.shape[2] - 1.0) / 2.0)], 1)
    return torch.nn.functional.grid_sample(input=tenIn, grid=(grid + tenFlow).permute(0, 2, 3, 1), mode="bilinear",
                                           padding_mode="zeros", align_corners=True)


def test_backwarp_has_the_published_meaning():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 9, 13, generator=g)
    flow = torch.randn(2, 2, 9, 13, generator=g) * 3
    torch.testing.assert_close(run.backwarp(tenIn=x, tenFlow=flow), _published_backwarp(x, flow))
    # an integer flow samples exactly: the output at p is the input at p + flow, zeros where that is outside
    shift = torch.zeros(1, 2, 9, 13)
    shift[:, 0], shift[:, 1] = 2.0, -1.0
    out = run.backwarp(tenIn=x[:1], tenFlow=shift)
    torch.testing.assert_close(out[:, :, 1:, :-2], x[:1, :, :-1, 2:])
    assert float(out[:, :, 0].abs().max()) == 0.0 and float(out[:, :, :, -2:].abs().max()) == 0.0


def test_read_flo_refuses_what_is_not_a_flo_file(tmp_path):
    bad_tag = tmp_path / "bad.flo"
    bad_tag.write_bytes(np.array([1.0, 0, 0], "<f4").tobytes())
    with pytest.raises(ValueError, match="not a .flo file"):
        run.read_flo(bad_tag)
    short = tmp_path / "short.flo"
    _write_flo(short, np.zeros((4, 5, 2), np.float32))
    short.write_bytes(short.read_bytes()[:-4])
    with pytest.raises(ValueError, match="5x4 .flo file needs 172 bytes, it has 168"):
        run.read_flo(short)


def test_no_cupy_on_cuda_is_said_once(monkeypatch):
    """Simulated on the CPU: a CUDA device, and CuPy missing."""
    from softsplat_vfi.engine.interpolator import warn_without_fast_kernels

    monkeypatch.setattr(softsplat, "cuda_available", lambda: False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default for RuntimeWarning: once per place it is raised from
        for _ in range(3):
            warn_without_fast_kernels(torch.device("cuda", 0))
        warn_without_fast_kernels(torch.device("cpu"))
        softsplat.warn_without_fast_kernels(torch.device("cuda", 0))  # another caller (splat's): still once
    assert len(caught) == 1 and issubclass(caught[0].category, RuntimeWarning)
    assert "pip install cupy-cuda12x" in str(caught[0].message)
    monkeypatch.setattr(softsplat, "cuda_available", lambda: True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warn_without_fast_kernels(torch.device("cuda", 0))
    assert not caught


def test_the_engine_checks_for_cupy_on_its_device(monkeypatch, cpu_network):
    import softsplat_vfi.engine.interpolator as interpolator

    seen = []
    monkeypatch.setattr(interpolator, "warn_without_fast_kernels", seen.append)
    interpolator.Interpolator(interpolator.InterpolatorOptions(), network=cpu_network)
    assert seen == [torch.device("cpu")]


def test_the_operator_warns_on_its_cuda_path_without_cupy(monkeypatch):
    """splat() calls the warning where a CUDA tensor takes the PyTorch path for lack of CuPy (simulated: the
    warning function sees the device; on the CPU it stays silent)."""
    seen = []
    monkeypatch.setattr(softsplat, "warn_without_fast_kernels", seen.append)
    x, flow = torch.rand(1, 2, 5, 6), torch.zeros(1, 2, 5, 6)
    softsplat.splat(x, flow, None, "sum")
    assert seen == []  # a CPU tensor: no warning asked for
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        monkeypatch.undo()
        monkeypatch.setattr(softsplat, "cuda_available", lambda: False)
        for _ in range(3):
            softsplat.warn_without_fast_kernels(torch.device("cuda", 0))
    assert len(caught) == 1 and "cupy-cuda13x" in str(caught[0].message)
