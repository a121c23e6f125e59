"""The video flags are declared once, from the ``VideoOptions`` fields (``pipeline.video``), through the helper the
engine's flags use (``engine.options.add_flags(parser, options=VideoOptions)``): no tool declares a video flag of its
own, every tool that takes one has run.py's help, type and default, and declaring flags has no side effect (the
library's notes are shown by a command line when it runs: ``engine.options.show_notes``). Issue 83, part 3."""

from __future__ import annotations

import argparse
import ast
import importlib
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Dict, List

import pytest

from softsplat_vfi.engine.options import add_flags, cli_message
from softsplat_vfi.media.declare import frames_fields
from softsplat_vfi.media.errors import FieldError, Said
from softsplat_vfi.pipeline.video import VideoOptions, video_options_from_args

ROOT = Path(__file__).resolve().parent.parent

# every flag the video options declare: --factor, --fps, ..., --overwrite, -y, --no-space-check
VIDEO_FLAGS = {name for f in fields(VideoOptions) for names, _ in f.metadata["flags"] for name in names}

# (file, flag) declared outside the helper, each with why
ALLOWED = {
    # the scorer's path for held-out triplets (default linear: the pair alone), not a video job's option; training
    # sits below the pipeline and cannot take its declaration
    ("training/holdout.py", "--motion"),
}

# every tool that takes video flags, as (module, argv up to the parse)
TOOLS = ["run", "bench.bench_video", "bench.bench_encoders"]


def _declared_outside_the_helper() -> Dict[str, List[str]]:
    """file -> the video flags its own ``add_argument`` calls declare (by AST: a flag named in a help text or a
    docstring does not count)."""
    found: Dict[str, List[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "shared") or rel.parts[0].startswith("."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                flags = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in VIDEO_FLAGS]
                if flags:
                    found.setdefault(rel.as_posix(), []).extend(flags)
    return found


def test_no_tool_declares_a_video_flag_of_its_own():
    own = {(name, flag) for name, flags in _declared_outside_the_helper().items() for flag in flags}
    stray = sorted(own - ALLOWED)
    assert not stray, f"declare these through engine.options.add_flags(parser, options=VideoOptions): {stray}"
    assert ALLOWED <= own, f"no longer declared, drop from ALLOWED: {sorted(ALLOWED - own)}"


class _Parsed(Exception):
    pass


def _parser_of(module: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser ``module.main`` builds, caught at its ``parse_args`` (before the tool runs)."""
    caught: List[argparse.ArgumentParser] = []

    def parse_args(self, *args, **kwargs):
        caught.append(self)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    with pytest.raises(_Parsed):
        importlib.import_module(module).main([])
    return caught[-1]


@pytest.mark.parametrize("module", TOOLS)
def test_each_tool_takes_the_declared_video_flags(module, monkeypatch):
    """The video flags a tool takes have the declaration's help (a tool that takes several values adds that it
    does), type, destination and choices, whatever defaults its protocol states."""
    declared_parser = argparse.ArgumentParser()
    add_flags(declared_parser, options=VideoOptions)
    declared = {name: action for action in declared_parser._actions for name in action.option_strings}
    actions = {name: action for action in _parser_of(module, monkeypatch)._actions for name in action.option_strings}
    taken = sorted(set(actions) & VIDEO_FLAGS)
    assert taken, f"{module} takes no video flag"
    for name in taken:
        action, own = actions[name], declared[name]
        assert action.help is own.help or action.help.startswith(own.help), (module, name)
        assert action.type is own.type and action.dest == own.dest and action.const == own.const, (module, name)
        assert action.choices == own.choices, (module, name)


def test_run_py_states_the_video_defaults_once():
    """run.py's flags, none given, make the pipeline's own defaults: each default is the field's."""
    import run

    args = run.build_parser().parse_args(["--video", "in.mp4", "--out", "out.mp4"])
    assert video_options_from_args(args) == VideoOptions()
    assert (args.dedup_threshold, args.field_rate, args.space_check) == (0.0, False, True)  # stored by field name
    args = run.build_parser().parse_args(["--video", "in.mp4", "--out", "out.mp4", "--dedup", "--fields",
                                          "--no-space-check", "-y"])
    assert video_options_from_args(args) == VideoOptions(dedup_threshold=0.002, field_rate=True, space_check=False,
                                                         overwrite=True)


def test_a_pair_refuses_the_video_group_and_takes_overwrite_and_the_space_check(tmp_path, capsys):
    import run
    from softsplat_vfi.cli import BOTH_MODES, SEQUENCE_GROUP

    parser = run.build_parser()
    group, = [g for g in parser._action_groups if g.title == SEQUENCE_GROUP]
    in_group = {a.dest for a in group._group_actions}
    flagged = {f.name for f in fields(VideoOptions) if f.metadata["flags"]}
    assert flagged - in_group == set(BOTH_MODES)
    one = tmp_path / "a.png"
    with pytest.raises(SystemExit):
        run.main(["--one", str(one), "--two", str(one), "--out", str(tmp_path / "m.png"), "--crf", "20", "-y"])
    assert "error: --crf: it applies to --video and --frames, not to a pair" in capsys.readouterr().err


def test_the_cli_table_says_each_video_field_as_its_flag():
    import run
    from softsplat_vfi.cli import flag_table

    table = flag_table()
    assert (table["field_rate"], table["space_check"], table["dedup_threshold"]) == \
        ("--fields", "--no-space-check", "--dedup")
    assert table["overwrite"] == "--overwrite (-y)" and table["flow_scale"] == "--flow-scale"
    flags = {name for action in run.build_parser()._actions for name in action.option_strings}
    for field, said in table.items():
        for flag in said.replace(",", " ").replace("(", " ").replace(")", " ").split():
            assert flag == "or" or flag in flags, (field, flag)
    exc = FieldError(Said("{field_rate} reads interlaced video: use {space_check:=False}"))
    assert str(exc) == "field_rate reads interlaced video: use space_check=False"
    assert cli_message(exc, table) == "--fields reads interlaced video: use --no-space-check False"


def test_the_frame_options_are_those_declared_to_change_the_frames():
    """A resumed video job starts over when these differ (``pipeline.video._job_key``); audio, segment sizes, the
    space check and overwrite leave the frames as they are."""
    assert set(frames_fields(VideoOptions)) == {"factor", "fps", "slowmo", "scene_threshold", "dedup_threshold",
                                                "motion", "field_rate", "crf", "codec", "preset", "pix_fmt"}


def test_declaring_the_flags_sets_up_no_logging():
    """add_flags showed the library's notes as a side effect; a command line now does at the start of its main."""
    code = ("import argparse, logging, run; from softsplat_vfi.engine.options import add_flags; "
            "from softsplat_vfi.pipeline.video import VideoOptions; run.build_parser(); "
            "add_flags(argparse.ArgumentParser()); add_flags(argparse.ArgumentParser(), options=VideoOptions); "
            "print(logging.getLogger('softsplat_vfi').handlers, logging.getLogger('softsplat_vfi').level)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["[]", "0"], done.stdout + done.stderr


def test_a_tool_shows_the_notes_when_it_runs():
    """run.py's main shows them from its start (here a pair whose files are missing: exit 2, after the parse)."""
    code = ("import logging, run; from softsplat_vfi.engine.options import NOTE_LOGGER; "
            "code = run.main(['--one', 'missing.png', '--two', 'missing.png', '--out', 'm.png']); "
            "print(code, [type(h).__name__ for h in logging.getLogger(NOTE_LOGGER).handlers])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["2", "['_Notes']"], done.stdout + done.stderr
