"""Every tool takes run.py's engine flags from their one declaration (``engine.options.add_flags``): no tool
declares ``--weights``, ``--device``, ``--flow-scale`` or another engine flag of its own, and the flags each tool
parses have the declared help and checks (issue 83, part 3)."""

from __future__ import annotations

import argparse
import ast
import importlib
from dataclasses import fields, replace
from fractions import Fraction
from pathlib import Path
from typing import Dict, List

import pytest

from softsplat_vfi.engine.options import InterpolatorOptions, add_flags, flow_scale_value

ROOT = Path(__file__).resolve().parent.parent

# every flag the engine's options declare: --model, --weights, --device, --fp32, ..., --flow-scale, --scale, ...
ENGINE_FLAGS = {name for f in fields(InterpolatorOptions) for names, _ in f.metadata["flags"] for name in names}

# (file, flag) declared outside the helper, each with why
ALLOWED = {
    # a benchmark mode of its own (time torch.compile beside eager), not the engine option
    ("bench/bench_network.py", "--compile"),
    # torch.compile of the training step, not of the engine
    ("bench/bench_train.py", "--compile"),
}


def _declared_outside_the_helper() -> Dict[str, List[str]]:
    """file -> the engine flags its own ``add_argument`` calls declare (by AST, so that a string in a help text or
    a docstring does not count)."""
    found: Dict[str, List[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "tests", "shared") or rel.parts[0].startswith(".") or \
                rel == Path("softsplat_vfi/engine/options.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                flags = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in ENGINE_FLAGS]
                if flags:
                    found.setdefault(rel.as_posix(), []).extend(flags)
    return found


def test_no_tool_declares_an_engine_flag_of_its_own():
    own = {(name, flag) for name, flags in _declared_outside_the_helper().items() for flag in flags}
    stray = sorted((name, flag) for name, flag in own if (name, flag) not in ALLOWED)
    assert not stray, f"declare these through engine.options.add_flags: {stray}"
    assert ALLOWED <= own, f"no longer declared, drop from ALLOWED: {sorted(ALLOWED - own)}"


# every tool that takes engine flags, as (module, argv up to the parse)
TOOLS = ["run", "benchmark_middlebury", "benchmark_xiph", "training.holdout", "bench.patterns", "bench.bench_network",
         "bench.bench_cpu", "bench.bench_video", "bench.compile_check", "scripts.diagnose.patterns",
         "scripts.diagnose.validation", "scripts.diagnose.flow_error", "training.export"]


class _Parsed(Exception):
    pass


def _parser_of(module: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser ``module.main`` builds, caught at its ``parse_args``."""
    caught: List[argparse.ArgumentParser] = []

    def parse_args(self, *args, **kwargs):
        caught.append(self)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    with pytest.raises(_Parsed):
        importlib.import_module(module).main([])
    return caught[-1]


def _declared() -> Dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return {name: action for action in parser._actions for name in action.option_strings}


@pytest.mark.parametrize("module", TOOLS)
def test_each_tool_takes_the_declared_flags(module, monkeypatch):
    """The engine flags a tool takes have the declaration's help (a tool that takes several weights files adds
    that it does) and check, whatever defaults its protocol states."""
    declared = _declared()
    actions = {name: action for action in _parser_of(module, monkeypatch)._actions for name in action.option_strings}
    file = module.replace(".", "/") + ".py"
    taken = sorted(name for name in set(actions) & ENGINE_FLAGS if (file, name) not in ALLOWED)
    assert taken, f"{module} takes no engine flag"
    for name in taken:
        action, own = actions[name], declared[name]
        assert action.help is own.help or action.help.startswith(own.help), (module, name)
        assert action.type is own.type or getattr(action.type, "__name__", None) == own.type.__name__, (module, name)
        assert action.dest == own.dest and action.const == own.const, (module, name)
    if "--flow-scale" in actions:
        assert actions["--flow-scale"].type is flow_scale_value


def test_defaults_are_checked_by_the_fields_rule_and_shown():
    from softsplat_vfi.media.declare import DefaultsFormatter

    parser = argparse.ArgumentParser(formatter_class=DefaultsFormatter)
    add_flags(parser, only=("device", "precision", "cuda_graphs"), defaults={"device": "cpu", "precision": "fp32"})
    args = parser.parse_args([])
    assert (args.device, args.precision, args.cuda_graphs) == ("cpu", "fp32", True)
    args = parser.parse_args(["--bf16", "--eager", "--device", "cuda:1"])
    assert (args.device, args.precision, args.cuda_graphs) == ("cuda:1", "bf16", False)
    assert "(default: cpu)" in parser.format_help()
    # a switch names no default: --eager's field is True, which "(default: True)" would say of --eager itself
    assert "(default: True)" not in parser.format_help() and "(default: False)" not in parser.format_help()
    with pytest.raises(ValueError, match="the default precision='fp64': use one of auto, fp32"):
        add_flags(argparse.ArgumentParser(), defaults={"precision": "fp64"})
    with pytest.raises(ValueError, match="'flowscale' is no field"):
        add_flags(argparse.ArgumentParser(), defaults={"flowscale": 1.0})


def test_several_values_each_pass_the_one_check(capsys):
    parser = argparse.ArgumentParser()
    add_flags(parser, only=("weights", "flow_scale"), several=("weights", "flow_scale"))
    args = parser.parse_args(["--weights", "a.safetensors", "b.pytorch", "--flow-scale", "1", "auto"])
    assert args.weights == [Path("a.safetensors"), Path("b.pytorch")] and args.flow_scale == [1.0, "auto"]
    assert not hasattr(args, "model")  # (--model names one file)
    assert parser.parse_args([]).weights == []
    with pytest.raises(SystemExit):
        parser.parse_args(["--flow-scale", "0.5", "2"])
    assert "'2': use auto or a factor in (0, 1]" in capsys.readouterr().err


def test_a_bad_device_is_said_by_the_one_check(capsys):
    """The tools that resolve --device themselves say a bad one as run.py does (engine.options.device_for)."""
    from training.holdout import main as holdout_main

    assert holdout_main(["--data", "missing", "--compile", "--device", "tpu"]) == 2
    assert "--device 'tpu' is not a device: use auto, cpu, cuda or cuda:N" in capsys.readouterr().err
    validation = importlib.import_module("scripts.diagnose.validation")
    with pytest.raises(SystemExit):
        validation.main(["--data", "missing", "--device", "tpu"])
    assert "--device 'tpu' is not a device: use auto, cpu, cuda or cuda:N" in capsys.readouterr().err


def test_run_py_video_flags_reach_every_video_option(tmp_path):
    """run.py's video flags are mapped to ``VideoOptions`` in one place (``pipeline.video.video_options_from_args``),
    each flag to its field: every field a flag sets, set here away from its default, arrives."""
    import run
    from softsplat_vfi.pipeline.video import VideoOptions, video_options_from_args

    args = run.build_parser().parse_args([
        "--video", "in.mp4", "--out", str(tmp_path / "out.webm"), "--factor", "3", "--fps", "60000/1001", "--slowmo",
        "--scene-threshold", "0.2", "--dedup", "--crf", "20", "--preset", "veryfast", "--pix-fmt", "yuv444p",
        "--segment-seconds", "5", "--fields", "--no-space-check", "--audio-codec", "aac", "--audio-bitrate", "192k",
        "--motion", "linear", "--overwrite"])
    options = video_options_from_args(args)
    assert options == VideoOptions(factor=3, fps=Fraction(60000, 1001), slowmo=True, scene_threshold=0.2,
                                   dedup_threshold=0.002, crf=20, codec="libvpx-vp9", preset="veryfast",
                                   pix_fmt="yuv444p", segment_seconds=5.0, field_rate=True, space_check=False,
                                   audio_codec="aac", audio_bitrate="192k", motion="linear", overwrite=True)
    unset = {f.name for f in fields(VideoOptions) if getattr(options, f.name) == f.default}
    assert unset == {"segment_work_seconds"}  # (no flag: a protocol's own, bench_video's one-segment row)
    assert video_options_from_args(args, leave=("codec", "crf"), motion="quadratic") == \
        replace(options, codec="libx264", crf=18, motion="quadratic")
    # a tool that declares fewer flags gets the pipeline's defaults for the rest
    assert video_options_from_args(argparse.Namespace(factor=4, preset="fast")) == VideoOptions(factor=4,
                                                                                               preset="fast")
