"""The published names at the repository's top stand for the package's own objects: ``run`` (the command and
``run.estimate`` / ``read_flo`` / ``backwarp``), ``softsplat`` (the operator), ``model`` (the network's old import
name) and ``weights/`` (the shipped files), so that code written against them runs unchanged."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_run_and_softsplat_are_the_packages_functions():
    import run
    import softsplat

    from softsplat_vfi import cli
    from softsplat_vfi import softsplat as operator

    assert run.main is cli.main and run.estimate is cli.estimate and run.backwarp is cli.backwarp
    assert run.read_flo is cli.read_flo and run.build_parser is cli.build_parser
    assert softsplat.softsplat is operator.softsplat and softsplat.splat is operator.splat


def test_the_old_model_name_gives_the_same_modules_and_classes():
    import model
    import model.network
    from model.weights import load_weights

    import softsplat_vfi.model.network
    from softsplat_vfi.model import weights

    assert model.network is softsplat_vfi.model.network and model.Network is softsplat_vfi.model.network.Network
    assert load_weights is weights.load_weights


def test_the_weights_folder_is_the_packages():
    assert (ROOT / "weights").resolve() == (ROOT / "softsplat_vfi" / "weights").resolve()
    assert {p.name for p in (ROOT / "weights").glob("*.safetensors")} == {"network.safetensors", "fast.safetensors"}


def test_importing_the_package_imports_no_torch():
    code = "import sys, softsplat_vfi; print('torch' in sys.modules, softsplat_vfi.__all__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.startswith("False ['Interpolator', 'InterpolatorOptions', 'resolve_device']"), done.stdout
