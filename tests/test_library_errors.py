"""The library speaks Python: its errors and notes name options by their field names (``flow_scale``), and the
command line says the same things with its flags (``--flow-scale``: engine.options.FLAGS, cli_message, show_notes).
"""

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import run
from softsplat_vfi.engine.options import FLAGS, InterpolatorOptions, check_times, cli_message, flag_for, show_notes
from softsplat_vfi.media.errors import FieldError, Said

ROOT = Path(__file__).resolve().parent.parent


def test_a_bad_option_names_the_field_and_the_cli_says_the_flag():
    with pytest.raises(ValueError) as caught:
        InterpolatorOptions(flow_scale=2.0)
    exc = caught.value
    assert isinstance(exc, FieldError) and exc.field == "flow_scale"
    assert str(exc) == "InterpolatorOptions flow_scale=2.0: use auto or a value in (0, 1] (None: the weights file's " \
                       "default)"
    assert "--" not in str(exc)
    assert cli_message(exc).startswith("InterpolatorOptions --flow-scale 2.0: use auto")


def test_too_many_times_name_the_field_in_the_library_and_the_flag_on_the_command_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^times: 1001 times, more than the 1000") as caught:
        check_times([0.5] * 1001)
    assert caught.value.field == "times" and "--time" not in str(caught.value)
    one = tmp_path / "a.png"
    one.write_bytes(b"")  # (never read: the times are refused first)
    code = run.main(["--one", str(one), "--two", str(one), "--out", str(tmp_path / "o-{i}.png"),
                     "--time", *["0.5"] * 1001])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --time: 1001 times, more than the 1000"), err


def test_media_errors_name_fields_and_keep_values_braces_as_they_are(tmp_path):
    """A path's own braces (an image pattern's ``{i}``) are a value, never a placeholder."""
    from softsplat_vfi.media.files import check_replaceable

    out = tmp_path / "o-{i}.png"
    out.write_bytes(b"a user's file")
    with pytest.raises(ValueError) as caught:
        check_replaceable(out, False, "run.py --one --two")
    exc = caught.value
    assert exc.fields == ("out", "overwrite")
    assert str(exc) == f"{out} exists, and this program did not write it: it is kept -- choose another out name, " \
                       f"or add overwrite=True to replace it (nothing was interpolated yet)"
    assert cli_message(exc) == f"{out} exists, and this program did not write it: it is kept -- choose another " \
                               f"--out name, or add --overwrite (-y) to replace it (nothing was interpolated yet)"


def test_said_values_and_fields():
    said = Said("{tile} {value}: use {tile:=0} or {compile:=True} ({size:.1f} GiB)", value=7, size=1.25)
    assert said.fields == ("tile", "compile")
    assert str(said) == "tile 7: use tile=0 or compile=True (1.2 GiB)"
    assert said.said_as(flag_for) == "--tile 7: use --tile 0 or --compile (1.2 GiB)"
    assert FieldError("plain {braces}").said_as(flag_for) == "plain {braces}"  # a plain message names no field
    # an error raised again with more to say keeps its fields; the words added are taken as they are
    more = FieldError(said).followed_by("; then out-{i}.png")
    assert more.fields == ("tile", "compile") and more.said_as(flag_for).endswith("GiB); then out-{i}.png")
    assert FieldError("plain").followed_by("; more {x}") == "plain; more {x}"


def test_the_flag_table_comes_from_the_declarations_and_names_real_flags():
    assert FLAGS["weights"] == "--weights" and FLAGS["flow_scale"] == "--flow-scale" and FLAGS["tile"] == "--tile"
    assert FLAGS["precision"] == "--fp32, --fp16 or --bf16" and FLAGS["times"] == "--time"
    flags = {name for action in run.build_parser()._actions for name in action.option_strings}
    # every field the library's messages name, as the command line says it
    named = ["out", "overwrite", "frames", "times", "tile", "compile", "device", "flow_scale", "audio_codec",
             "audio_bitrate", "crf", "pix_fmt", "codec", *FLAGS]
    for field in named:
        for flag in flag_for(field).replace(",", " ").split():
            assert flag in ("or", "(-y)") or flag in flags, (field, flag)


def test_a_note_is_a_log_record_and_the_cli_shows_it_on_stderr(cpu_network, monkeypatch, caplog, capsys):
    """The engine's notes are logging records (INFO), naming fields; after show_notes (what a command line does at
    its start) they are "note: ..." lines on stderr, naming flags."""
    import softsplat_vfi.model.runtime
    from softsplat_vfi.engine import Interpolator

    monkeypatch.setattr(softsplat_vfi.model.runtime, "compile_network", lambda net: net)
    with caplog.at_level(logging.INFO, logger="softsplat_vfi"):
        Interpolator(InterpolatorOptions(compile=True), network=cpu_network)
    record, = [r for r in caplog.records if r.name == "softsplat_vfi.engine.interpolator"]
    assert record.levelno == logging.INFO and record.getMessage().startswith("compile: the network compiles")
    show_notes()
    show_notes()  # (once, however often)
    capsys.readouterr()
    Interpolator(InterpolatorOptions(compile=True), network=cpu_network)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: --compile: the network compiles on the first pair"), err


def test_the_cli_shows_the_tile_note_with_its_flag(tmp_path, monkeypatch, capsys):
    import cv2

    import softsplat_vfi.model.inference as inference

    monkeypatch.setattr(inference, "TILE_SIZES", (64,))
    monkeypatch.setattr(inference, "available_memory", lambda device: int(64 * 64 * 1100 * 1.5))
    rng = np.random.default_rng(0)
    one, two = tmp_path / "a.png", tmp_path / "b.png"
    for path in (one, two):
        cv2.imwrite(str(path), rng.integers(0, 255, (80, 96, 3), dtype=np.uint8))
    assert run.main(["--one", str(one), "--two", str(two), "--out", str(tmp_path / "m.png"), "--device", "cpu",
                     "--tile-overlap", "16"]) == 0
    err = capsys.readouterr().err
    assert "note: 96x80 frames need about" in err and "processing in 64-pixel tiles (--tile 0 forces whole " \
                                                      "frames)" in err, err


def test_importing_the_library_sets_up_no_logging():
    code = ("import logging, softsplat_vfi.engine.options, softsplat_vfi.engine.interpolator, "
            "softsplat_vfi.model.runtime, softsplat_vfi.media.video; "
            "print([logging.getLogger(n).handlers for n in ('softsplat_vfi', 'softsplat_vfi.engine', "
            "'softsplat_vfi.model')], logging.getLogger('softsplat_vfi').level)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split("]")[-1].strip() == "0" and done.stdout.startswith("[[], [], []]"), done.stdout
