"""``pip install .`` gives one top-level package, the two published shims and a working ``softsplat-vfi`` command,
equal to ``python run.py``.

A fresh virtual environment that sees this interpreter's packages (torch is not installed again), the package built
from a copy of what it ships (so that the build leaves nothing in the checkout), installed without dependencies;
then the command, run from another folder, interpolates the sample pair into the frame ``python run.py`` writes.
"""

import os
import shutil
import site
import subprocess
import venv
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parent.parent
# what pyproject.toml ships: the package (the operator, the library, the command, the weights) and the two shims
SHIPPED = ["pyproject.toml", "README.md", "run.py", "softsplat.py", "softsplat_vfi"]


def test_pip_install_gives_the_command(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # this interpreter's packages (torch, pip, setuptools) behind the new environment's own
    inner = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    (Path(inner) / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", str(source)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr

    command = env_dir / "bin" / "softsplat-vfi"
    assert command.is_file()
    work = tmp_path / "elsewhere"  # not the checkout: the weights must come from the installed package
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import run, softsplat, softsplat_vfi.engine.options as o; "
                            "print(run.__file__); print(o.DEFAULT_WEIGHTS); print(softsplat.softsplat.__module__)"],
                           capture_output=True, text=True, env=env, cwd=work, check=True)
    run_file, weights, operator = where.stdout.split()
    assert Path(run_file).is_relative_to(env_dir) and Path(weights).is_relative_to(env_dir), where.stdout
    assert Path(weights).is_file() and operator == "softsplat_vfi.softsplat"
    # one top-level package and the two shims: none of the common names (model, engine, media, pipeline, weights)
    installed = Path(inner)
    tops = {p.name.removesuffix(".py") for p in installed.iterdir()
            if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert tops == {"softsplat_vfi", "run", "softsplat"}, sorted(tops)

    out = work / "mid.png"
    done = subprocess.run([str(command), "--one", str(ROOT / "images" / "one.png"), "--two",
                           str(ROOT / "images" / "two.png"), "--out", str(out), "--device", "cpu"],
                          capture_output=True, text=True, env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    # the frame python run.py writes (tests/test_frames_unchanged.py: its reference frames, within its tolerance)
    from tests.test_frames_unchanged import assert_unchanged

    assert_unchanged([cv2.imread(str(out), cv2.IMREAD_UNCHANGED)], "guard_on", "cli_pair")
    helped = subprocess.run([str(command), "--help"], capture_output=True, text=True, env=env, cwd=work)
    assert helped.returncode == 0 and "--video" in helped.stdout
