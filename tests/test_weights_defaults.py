"""Defaults that belong to the weights live in the weights (issue 83, part 2).

A weights file's metadata states the settings it runs at unless told others (key ``inference``, read by
``model.weights.inference_defaults``); the shipped files got theirs by a header-only rewrite, which left every tensor
bitwise as it was. New files get them from ``save_weights`` (``model.weights.defaults_for`` their config, or
``python -m training.export --flow-scale``)."""

import hashlib
import json
import struct
from pathlib import Path

import pytest

from softsplat_vfi.model.network import Network, NetworkConfig
from softsplat_vfi.model.weights import (AUTO_SCALE_CONFIG, FALLBACK_DEFAULTS, INFERENCE_KEY, WeightsError,
                                         defaults_for, inference_defaults, read_config, read_metadata, save_weights)

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "softsplat_vfi" / "weights"
# each shipped file's SHA-256 of its data section (every byte after the header) and of its tensor table (the header
# without its metadata, as sorted JSON: names, dtypes, shapes, offsets), taken at 974e694, before the inference
# defaults went into the headers
PINNED = {
    "network": ("13e8061f78c7e84d07db80fa7ebcf613f270ccf8df47a0bce4d2e7a48322ae51",
                "09e0742d8fe73f81bf0ef36a75899f8573b95a0b91e747b96f5c4038c8b22507"),
    "fast": ("427c1b5c6d54d344a145bd966c34393dfe5d3c9443780c97e85bb9bc47d7d264",
             "881778c4ed1f9566d43a2f330a36fdaec2ecc5de8efa69ec9ff822e0c53d10ed"),
}


def _digests(path: Path):
    raw = path.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    table = json.loads(raw[8:8 + size])
    table.pop("__metadata__", None)
    return (hashlib.sha256(raw[8 + size:]).hexdigest(),
            hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest())


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_shipped_tensors_are_bitwise_as_before_the_defaults(name):
    assert _digests(WEIGHTS / f"{name}.safetensors") == PINNED[name]


def test_the_shipped_files_state_what_run_py_ran_them_at():
    """auto for the default network (F12 chose it on held-out footage), 1 for the fast one."""
    assert inference_defaults(WEIGHTS / "network.safetensors") == {"flow_scale": "auto"}
    assert inference_defaults(WEIGHTS / "fast.safetensors") == {"flow_scale": 1.0}
    assert json.loads(read_metadata(WEIGHTS / "network.safetensors")[INFERENCE_KEY]) == {"flow_scale": "auto"}


def test_weights_that_state_nothing_run_at_the_fallback(tmp_path):
    """Files written before the key, published checkpoints (no metadata) and a path that is no file."""
    old = tmp_path / "old.safetensors"
    save_weights(Network(NetworkConfig(full_width=8)), old, extra={INFERENCE_KEY: "{}"})
    assert inference_defaults(old) == FALLBACK_DEFAULTS == {"flow_scale": 1.0}
    from safetensors.torch import save_file

    bare = tmp_path / "bare.safetensors"
    save_file({k: v.contiguous() for k, v in Network(NetworkConfig(full_width=8)).state_dict().items()}, str(bare),
              metadata={"config": json.dumps(NetworkConfig(full_width=8).to_dict()), "format": "softsplat-vfi"})
    assert inference_defaults(bare) == FALLBACK_DEFAULTS
    published = tmp_path / "network-lf.pytorch"
    published.write_bytes(b"PK\x03\x04")
    assert inference_defaults(published) == FALLBACK_DEFAULTS
    assert inference_defaults(tmp_path / "nowhere.safetensors") == FALLBACK_DEFAULTS


@pytest.mark.parametrize("text, words", [("auto", "not a JSON object"), ('["auto"]', "not a JSON object"),
                                         ('{"flow_scale": 1, "ensemble": 2}', "names ensemble")])
def test_a_field_it_cannot_read_is_named(tmp_path, text, words):
    path = tmp_path / "w.safetensors"
    save_weights(Network(NetworkConfig(full_width=8)), path, extra={INFERENCE_KEY: text})
    with pytest.raises(WeightsError, match=f"w.safetensors: its metadata's 'inference' .*{words}"):
        inference_defaults(path)


def test_a_default_the_engine_refuses_is_named_with_the_file(tmp_path):
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    path = tmp_path / "w.safetensors"
    net = Network(NetworkConfig(full_width=8))
    save_weights(net, path, inference={"flow_scale": 1.5})
    with pytest.raises(WeightsError, match=r"w.safetensors: the inference defaults .* flow_scale=1.5: use auto or"):
        Interpolator(InterpolatorOptions(weights=path, device="cpu"), network=net)


def test_new_weights_state_the_default_of_their_config(tmp_path):
    """The rule, stated once (``defaults_for``): auto for the default network's architecture, 1 for any other."""
    for name in ("network", "fast"):  # the shipped files state what the rule gives their configs
        path = WEIGHTS / f"{name}.safetensors"
        assert defaults_for(read_config(path)) == inference_defaults(path), name
    assert defaults_for(AUTO_SCALE_CONFIG) == {"flow_scale": "auto"}
    assert defaults_for(NetworkConfig()) == defaults_for(NetworkConfig().widened(2)) == {"flow_scale": 1.0}
    path = tmp_path / "small.safetensors"
    save_weights(Network(NetworkConfig(full_width=8)), path)
    assert inference_defaults(path) == {"flow_scale": 1.0}
    save_weights(Network(NetworkConfig(full_width=8)), path, inference={"flow_scale": "auto"})
    assert inference_defaults(path) == {"flow_scale": "auto"}



def test_export_states_the_flow_scale_it_is_told_or_keeps_or_applies_the_rule(tmp_path, capsys):
    """``python -m training.export``: ``--flow-scale`` states a default; without it a copy under the same config keeps
    its source's (the same network), one with other flow passes gets the rule's (another network)."""
    from training.export import main

    source = tmp_path / "source.safetensors"
    save_weights(Network(NetworkConfig(full_width=8)), source, inference={"flow_scale": "auto"})

    def export(*args: str) -> dict:
        out = tmp_path / "out.safetensors"
        assert main([str(source), "--out", str(out), *args]) == 0
        return inference_defaults(out)

    assert export("--flow-iterations", "1") == {"flow_scale": "auto"}
    assert export("--flow-iterations", "2") == {"flow_scale": 1.0}
    assert export("--flow-iterations", "2", "--flow-scale", "auto") == {"flow_scale": "auto"}
    assert export("--flow-iterations", "1", "--flow-scale", "0.5") == {"flow_scale": 0.5}
    capsys.readouterr()
    with pytest.raises(SystemExit):  # run.py's flag, with its one check
        main([str(source), "--out", str(tmp_path / "bad.safetensors"), "--flow-iterations", "1", "--flow-scale", "1.5"])
    assert "'1.5': use auto or a factor in (0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "bad.safetensors").exists()


# -- every way in: the same frames ---------------------------------------------------------------------------------

def _large_motion_pair(folder: Path) -> None:
    """images/one.png and two.png in ``folder``: a 128 x 96 crop of the sample frame and the same crop 80 px to the
    right, as 16-bit PNGs (every door then keeps 16-bit levels, which it would quantise differently to 8). Its
    motion (80 px) is over auto's 32-px test, and auto's frame differs from scale 1's, so a door at another flow
    scale than the weights' would give other frames."""
    import cv2
    import numpy as np

    sample = cv2.imread(str(ROOT / "images" / "one.png"))[20:116]
    (folder / "images").mkdir()
    for name, left in (("one.png", 40), ("two.png", 120)):
        cv2.imwrite(str(folder / "images" / name), sample[:, left:left + 128].astype(np.uint16) * 257)


def test_the_readme_block_run_py_and_the_comfyui_node_make_the_same_frames(tmp_path, monkeypatch, capsys):
    """The README's Python block (its float frames, and its ``interpolate_files``), ``run.py --one --two`` and the
    ComfyUI nodes (the loader's default model, an IMAGE batch of the pair doubled) on the same pair and the same
    weights (weights/network.safetensors, on the CPU) give the same 16-bit frame, byte for byte: each resolves the
    flow scale from the file (auto), where the library's default was 1 and ComfyUI chose by path."""
    import cv2
    import numpy as np
    import torch

    import run
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions
    from softsplat_vfi.integrations.comfyui.nodes import SoftsplatInterpolate, SoftsplatModelLoader
    from softsplat_vfi.media.images import read_image

    _large_motion_pair(tmp_path)
    monkeypatch.chdir(tmp_path)
    block: dict = {"__name__": "readme_block"}
    exec((ROOT / "tests" / "data" / "readme_python.py").read_text(), block)  # as written, from the folder
    readme_float = np.rint(np.clip(block["frames"][1], 0.0, 1.0) * 65535).astype(np.uint16)[:, :, ::-1]  # BGR
    readme_file = cv2.imread("mid.png", cv2.IMREAD_UNCHANGED)
    assert run.main(["--one", "images/one.png", "--two", "images/two.png", "--out", "cli.png", "--device",
                     "cpu"]) == 0
    cli = cv2.imread("cli.png", cv2.IMREAD_UNCHANGED)
    model, = SoftsplatModelLoader().load("default", "cpu", "auto")
    one, two = (read_image(Path("images") / name)[0] for name in ("one.png", "two.png"))
    out, _, _ = SoftsplatInterpolate().interpolate(model, torch.from_numpy(np.stack([one, two])), 2, 24.0, 0.0,
                                                   0.12, 0.0, False, "quadratic", None)
    comfy = np.rint(out[1].numpy() * 65535).astype(np.uint16)[:, :, ::-1]
    assert readme_file.dtype == np.uint16 and readme_file.shape == (96, 128, 3)
    for name, frame in (("README float", readme_float), ("run.py", cli), ("ComfyUI", comfy)):
        assert frame.tobytes() == readme_file.tobytes(), name
    # and the flow scale decides this frame: at scale 1 (the library's old default) it is another
    other, = Interpolator(InterpolatorOptions(device="cpu", flow_scale=1.0))(one, two, [0.5])
    other = np.rint(np.clip(other, 0.0, 1.0) * 65535).astype(np.uint16)[:, :, ::-1]
    assert np.mean(other != readme_file) > 0.05
    capsys.readouterr()
