"""training.reproduce: the declared chains of the shipped weights, the plan it prints, and which step each call runs.

train.py is replaced by a stand-in that parses its arguments and finds its start point with train.py's own code
(``training.options.parse``, ``training.trainer.start_point``), then writes a state folder of a small network at the
step a chunk would reach; the exports and averages are the real ones.
"""

import dataclasses
import json
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

import train
import training.average
import training.export
import training.stage
from softsplat_vfi.model.network import Network
from softsplat_vfi.model.weights import read_metadata
from training.config import RECIPES, TrainConfig
from training.options import parse
from training.reproduce import CHAINS, Average, Export, Select, Train, main, reached_steps, start_step
from training.trainer import start_point

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def folders(tmp_path) -> List[Path]:
    """Two footage folders as the runner sees them (train.py is a stand-in: no clips needed)."""
    made = []
    for name in ("footage", "footage2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "clips.jsonl").write_text("")
        made.append(tmp_path / name)
    return made


class Stand:
    """Stand-ins for train.py (``chunk`` steps per call) and training.stage; every call is recorded."""

    def __init__(self, monkeypatch, chunk: int = 10 ** 6, code: int = 0) -> None:
        self.calls: List[Tuple[str, List[str]]] = []
        self.chunk, self.code = chunk, code
        monkeypatch.setattr(train, "main", self.train)
        monkeypatch.setattr(training.stage, "main", self.stage)
        for module in (training.export, training.average):
            monkeypatch.setattr(module, "main", self.recorded(module.__name__, module.main))

    def recorded(self, name, real):
        def call(argv):
            self.calls.append((name, argv))
            return real(argv)
        return call

    def train(self, argv: List[str]) -> int:
        from safetensors.torch import save_file

        self.calls.append(("train", argv))
        if self.code:
            return self.code
        options, overrides = parse(argv)
        start = start_point(options, overrides)  # train.py's checks of the recipe, the step and the schedule
        end = start.config.schedule_start + start.config.total_steps
        left = min(end - start.step, self.chunk, end if options.max_steps is None else options.max_steps)
        net_config = start.net_config
        if options.resume is None and options.init_weights is None:
            net_config = net_config.widened(0.25)  # a small network: the chain only moves files
        out = options.out
        out.mkdir(parents=True, exist_ok=True)
        save_file(Network(net_config).state_dict(), str(out / "state_model.safetensors"))
        (out / "config.json").write_text(json.dumps(net_config.to_dict()))
        start.config.save(out / "train_config.json")
        (out / "progress.json").write_text(json.dumps({"step": start.step + left}))
        print(f"done: step {start.step + left}: validation PSNR ...")  # as train.py ends a chunk
        return 0

    def stage(self, argv: List[str]) -> int:
        """pack: two bundles; unpack: each --data folder's (empty) clips.jsonl under --dest."""
        self.calls.append(("training.stage", argv))
        if argv[0] == "pack":
            out = Path(argv[argv.index("--out") + 1])
            for bundle in ("0", "1"):
                (out / bundle).mkdir(parents=True)
            self.names = [Path(a).name for a in argv[argv.index("--data") + 1:argv.index("--out")]]
        else:
            for name in self.names:
                (Path(argv[argv.index("--dest") + 1]) / name).mkdir(parents=True, exist_ok=True)
                (Path(argv[argv.index("--dest") + 1]) / name / "clips.jsonl").write_text("")
        return 0

    def modules(self) -> List[str]:
        return [name for name, _ in self.calls]


def _reproduce(weights: str, folders: List[Path], out: Path, capsys, *extra: str,
               minutes: Optional[str] = "8") -> Tuple[int, str]:
    """One call, in chunks of ``minutes`` (call by call, as on a machine with a time limit) unless None."""
    limit = [] if minutes is None or "--minutes" in extra else ["--minutes", minutes]
    code = main([weights, "--data", *map(str, folders), "--out", str(out), *limit, *extra])
    return code, capsys.readouterr().out


def _last_line(text: str, prefix: str) -> Optional[str]:
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    return lines[-1][len(prefix):] if lines else None


# -- the chains ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CHAINS))
def test_each_chain_makes_every_input_before_it_and_trains_within_its_recipes(name):
    chain = CHAINS[name]
    made = set()
    ends = []
    for step in chain:
        assert set(step.inputs) <= made, (step, made)
        assert step.out not in made
        made.add(step.out)
        if isinstance(step, Train):
            recipe = RECIPES[step.recipe]
            start = recipe.schedule_start if step.schedule_start is None else step.schedule_start
            # train.py refuses weights before their schedule's start; a stage ends at its schedule's end or earlier
            assert start <= start_step(step, chain) < step.end <= step.schedule_end, step
            ends.append(step.end)
        if isinstance(step, Average):
            assert step.recipe in RECIPES and len(step.shares) == len(step.sources)
    assert ends == sorted(ends)
    assert isinstance(chain[-1], Export) and chain[-1].out.endswith(".safetensors")


def test_the_default_chain_is_the_thirteen_stages_with_one_flow_export_and_three_averages():
    chain = CHAINS["default"]
    stages = [step for step in chain if isinstance(step, Train)]
    assert [stage.recipe for stage in stages] == [
        "study", "quality-384", "quality-512", "quality-no-census", "quality-no-flow", "quality", "quality-psnr",
        "quality-psnr-syn20", "quality-psnr-syn20", "quality-psnr-stripes", "quality-psnr-quadratic",
        "quality-psnr-quadratic", "quality-psnr-mixed"]
    assert stages[0].options == ("--width", "2") and stages[0].init is None
    assert all(stage.rewarm == 500 for stage in stages[1:])
    assert [stage.schedule_start for stage in stages].count(None) == 12 and stages[11].schedule_start == 74919
    assert [(s.flow_iterations, s.out) for s in chain if isinstance(s, Export) and s.flow_iterations] == [
        ((1, 2, 2, 2), "q6p.safetensors")]
    assert [(a.sources, a.shares, a.recipe, a.step) for a in chain if isinstance(a, Average)] == [
        (("q8.safetensors", "q7.safetensors"), (5, 3), "quality-psnr", 69919),
        (("q9.safetensors", "qa.safetensors"), (5, 3), "quality-psnr", 69919),
        (("q10.safetensors", "qb.safetensors"), (1, 1), "quality-psnr", 69919)]
    # the chain ends where the shipped file does: its recipe at its step
    metadata = read_metadata(ROOT / "softsplat_vfi" / "weights" / "network.safetensors")
    assert TrainConfig.from_dict(json.loads(metadata["train_config"])) == RECIPES[stages[-1].recipe]
    assert reached_steps(chain)[chain[-1].out] == int(metadata["step"]) == 84919


def test_the_fast_chain_stops_its_first_stage_early_and_selects_the_large_clips_for_the_last_two():
    chain = CHAINS["fast"]
    stages = [step for step in chain if isinstance(step, Train)]
    assert [(s.recipe, s.end, s.schedule_start) for s in stages] == [
        ("fast-base", 25000, None), ("fast", 32000, None), ("fast-psnr", 37000, 32000), ("fast-psnr", 42000, 37000)]
    assert stages[0].end < stages[0].schedule_end  # stopped by --max-steps, not by its schedule
    assert all(stage.rewarm == 0 for stage in stages)
    selects = [step for step in chain if isinstance(step, Select)]
    assert len(selects) == 1 and selects[0].min_short_side == 512
    assert [stage.data for stage in stages] == ["first", "first", selects[0].out, selects[0].out]


# -- the plan --------------------------------------------------------------------------------------------------

def test_the_dry_run_of_the_default_chain_prints_every_command_and_runs_nothing(folders, tmp_path, capsys,
                                                                                  monkeypatch):
    stand = Stand(monkeypatch)
    out = tmp_path / "repro"
    code, text = _reproduce("default", folders, out, capsys, "--dry-run", "--cuda-graph")
    assert code == 0 and stand.calls == [] and not out.exists()
    commands = [line.strip() for line in text.splitlines()]
    first_chunks = [line for line in commands if line.startswith("python train.py --recipe")]
    assert len(first_chunks) == 13
    assert first_chunks[0] == (f"python train.py --recipe study --width 2 --data {folders[0]} {folders[1]} "
                               f"--out {out / 'q1'} --minutes 8 --cuda-graph")
    assert f"--recipe quality-psnr-quadratic --init-weights {out / 'q11.safetensors'} --rewarm 500 " \
           f"--schedule-start 74919" in first_chunks[11]
    assert sum(line.startswith("then, until step") and "--resume" in line for line in commands) == 13
    assert (f"python -m training.export {out / 'q6.safetensors'} --out {out / 'q6p.safetensors'} "
            f"--flow-iterations 1 2 2 2") in commands
    averages = [line for line in commands if line.startswith("python -m training.average")]
    assert averages == [
        f"python -m training.average --out {out / 'qa.safetensors'} {out / 'q8.safetensors'} "
        f"{out / 'q7.safetensors'} --shares 5 3 --recipe quality-psnr --step 69919",
        f"python -m training.average --out {out / 'qb.safetensors'} {out / 'q9.safetensors'} "
        f"{out / 'qa.safetensors'} --shares 5 3 --recipe quality-psnr --step 69919",
        f"python -m training.average --out {out / 'qc.safetensors'} {out / 'q10.safetensors'} "
        f"{out / 'qb.safetensors'} --shares 1 1 --recipe quality-psnr --step 69919"]
    assert "30. [to do] export q13.safetensors" in commands


def test_the_dry_run_of_the_fast_chain_shows_the_selection_and_the_early_stop(folders, tmp_path, capsys):
    out = tmp_path / "repro"
    code, text = _reproduce("fast", folders, out, capsys, "--dry-run", "--frame-cache", str(tmp_path / "cache"))
    assert code == 0
    assert (f"python train.py --recipe fast-base --val-batches 16 --data {folders[0]} --frame-cache "
            f"{tmp_path / 'cache'} --out {out / 'base'} --minutes 8 --max-steps 25000") in text
    assert f"--resume {out / 'base'} " in text and "--max-steps LEFT" in text
    assert (f"python -m training.stage pack --data {folders[0]} {folders[1]} --out {out / 'q512'} "
            f"--min-short-side 512") in text
    assert f"--data {out / 'q512data' / 'footage'} {out / 'q512data' / 'footage2'}" in text


# -- one call, one chunk ----------------------------------------------------------------------------------------

def test_a_fresh_folder_gets_the_first_chunk_of_the_first_stage_and_no_more(folders, tmp_path, capsys, monkeypatch):
    stand = Stand(monkeypatch, chunk=1000)
    out = tmp_path / "repro"
    code = main(["default", "--data", *map(str, folders), "--out", str(out), "--minutes", "3", "--cuda-graph"])
    text, err = capsys.readouterr()
    assert code == 0 and stand.modules() == ["train"]
    # train.py's printing goes to stderr: on stdout only the last call's line starts with "done: "
    assert "done: step 1000" in err and "done:" not in text
    assert stand.calls[0][1] == ["--recipe", "study", "--width", "2", "--data", *map(str, folders),
                                 "--out", str(out / "q1"), "--minutes", "3", "--cuda-graph"]
    assert "q1: at step 1000 of 40000" in text
    assert _last_line(text, "next: ") == (f"python train.py --resume {out / 'q1'} --data {folders[0]} {folders[1]} "
                                          f"--out {out / 'q1'} --minutes 3 --cuda-graph")


def test_a_stage_trained_in_part_resumes_then_exports_and_stops_before_the_next(folders, tmp_path, capsys,
                                                                                 monkeypatch):
    stand = Stand(monkeypatch, chunk=30000)
    out = tmp_path / "repro"
    assert _reproduce("default", folders, out, capsys)[0] == 0
    stand.calls.clear()
    code, text = _reproduce("default", folders, out, capsys)
    assert code == 0 and stand.modules() == ["train", "training.export"]
    assert stand.calls[0][1][:2] == ["--resume", str(out / "q1")]
    assert read_metadata(out / "q1.safetensors")["step"] == "40000"
    assert _last_line(text, "next: ").startswith(
        f"python train.py --recipe quality-384 --init-weights {out / 'q1.safetensors'} --rewarm 500 ")
    assert "done: " not in text


def test_a_finished_stage_whose_state_was_deleted_is_not_trained_again(folders, tmp_path, capsys, monkeypatch):
    import shutil

    stand = Stand(monkeypatch)
    out = tmp_path / "repro"
    _reproduce("default", folders, out, capsys)  # q1 to its end, exported
    stand.chunk = 1000
    _reproduce("default", folders, out, capsys)  # q2's first chunk
    shutil.rmtree(out / "q1")
    stand.calls.clear()
    assert _reproduce("default", folders, out, capsys)[0] == 0
    assert [argv[:2] for _, argv in stand.calls] == [["--resume", str(out / "q2")]]


def test_an_output_another_process_made_meanwhile_is_not_made_again(folders, tmp_path, capsys, monkeypatch):
    """Under torchrun every process runs the chain: an export that another one wrote after this call looked is
    skipped (the check runs again under the lock of --out)."""
    stand = Stand(monkeypatch)
    real = stand.train
    out = tmp_path / "repro"

    def train_and_export_elsewhere(argv):
        code = real(argv)
        (out / "q1.safetensors").write_text("")  # the other process's export
        return code

    monkeypatch.setattr(train, "main", train_and_export_elsewhere)
    code, text = _reproduce("default", folders, out, capsys)
    assert code == 0 and stand.modules() == ["train"]
    assert _last_line(text, "next: ").startswith("python train.py --recipe quality-384 ")


def test_the_first_stage_of_the_fast_chain_stops_at_step_25000_across_chunks(folders, tmp_path, capsys,
                                                                              monkeypatch):
    stand = Stand(monkeypatch, chunk=10000)
    out = tmp_path / "repro"
    for _ in range(3):
        _reproduce("fast", folders, out, capsys)
    assert [argv[argv.index("--max-steps") + 1] for _, argv in stand.calls if _ == "train"] == [
        "25000", "15000", "5000"]
    assert read_metadata(out / "base.safetensors")["step"] == "25000"


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_without_minutes_one_call_runs_the_whole_chain_and_train_py_gets_no_limit(name, folders, tmp_path, capsys,
                                                                                 monkeypatch):
    stand = Stand(monkeypatch)
    out = tmp_path / "repro"
    chain = CHAINS[name]
    code, text = _reproduce(name, folders, out, capsys, minutes=None)
    assert code == 0 and _last_line(text, "done: ") == str(out / chain[-1].out)
    trains = [argv for module, argv in stand.calls if module == "train"]
    assert len(trains) == sum(isinstance(step, Train) for step in chain)
    assert not any("--minutes" in argv for argv in trains)
    assert "next:" not in text


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_a_chain_runs_call_by_call_to_done_and_then_runs_nothing(name, folders, tmp_path, capsys, monkeypatch):
    """Each call trains one whole stage here (chunks long enough), then runs the exports and averages it makes
    ready; the last call prints done and the chain's file, whose recipe and step are its last stage's."""
    stand = Stand(monkeypatch)
    out = tmp_path / "repro"
    chain = CHAINS[name]
    stages = [step for step in chain if isinstance(step, Train)]
    texts = [_reproduce(name, folders, out, capsys) for _ in stages]
    assert all(code == 0 for code, _ in texts)
    assert [_last_line(text, "done: ") for _, text in texts] == [None] * (len(stages) - 1) + [str(out / chain[-1].out)]
    kinds = {Train: "train", Export: "training.export", Average: "training.average"}
    expected = []
    for step in chain:
        expected += ["training.stage"] * 3 if isinstance(step, Select) else [kinds[type(step)]]  # pack, 2 unpacks
    assert stand.modules() == expected
    metadata = read_metadata(out / chain[-1].out)
    recipe = RECIPES[stages[-1].recipe]
    if stages[-1].schedule_start is not None:
        recipe = dataclasses.replace(recipe, schedule_start=stages[-1].schedule_start)
    assert TrainConfig.from_dict(json.loads(metadata["train_config"])) == recipe
    assert int(metadata["step"]) == stages[-1].end
    stand.calls.clear()
    code, text = _reproduce(name, folders, out, capsys)
    assert code == 0 and stand.calls == [] and _last_line(text, "done: ") == str(out / chain[-1].out)
    if name == "default":
        soup = read_metadata(out / "qa.safetensors")
        assert soup["step"] == "69919" and json.loads(soup["train_config"])["lr"] == RECIPES["quality-psnr"].lr
        assert json.loads(read_metadata(out / "q6p.safetensors")["config"])["flow_iterations"] == [1, 2, 2, 2]


def test_the_fast_chain_trains_its_last_stages_on_the_selected_clips_from_the_frame_cache(folders, tmp_path, capsys,
                                                                                         monkeypatch):
    stand = Stand(monkeypatch)
    out = tmp_path / "repro"
    for _ in range(3):
        _reproduce("fast", folders, out, capsys)
    unpacks = [argv for module, argv in stand.calls if module == "training.stage" and argv[0] == "unpack"]
    assert unpacks == [["unpack", str(out / "q512" / n), "--dest", str(out / "q512data"), "--cache",
                        str(out / "frame-cache")] for n in ("0", "1")]
    argv = [argv for module, argv in stand.calls if module == "train"][-1]
    assert argv[:2] == ["--recipe", "fast-psnr"]
    assert argv[argv.index("--data") + 1:argv.index("--out")] == [
        str(out / "q512data" / "footage"), str(out / "q512data" / "footage2"), "--frame-cache",
        str(out / "frame-cache")]


# -- errors ----------------------------------------------------------------------------------------------------

def test_a_failed_step_ends_the_call_with_its_exit_code(folders, tmp_path, capsys, monkeypatch):
    Stand(monkeypatch, code=2)
    assert main(["default", "--data", *map(str, folders), "--out", str(tmp_path / "repro")]) == 2
    assert "step 1 (q1) failed with exit code 2" in capsys.readouterr().err


def test_an_option_train_py_rejects_ends_the_call_with_its_exit_code(folders, tmp_path, capsys):
    """train.py's argparse exit (SystemExit) comes back as the call's exit code, before any training."""
    assert main(["fast", "--data", *map(str, folders), "--out", str(tmp_path / "repro"), "--no-such-option"]) == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert not (tmp_path / "repro" / "base" / "progress.json").exists()


@pytest.mark.parametrize("extra, message", [
    (["--init-weights", "w.safetensors"], "--init-weights: the chain sets it for each stage"),
    (["--schedule-start=5"], "--schedule-start=5: the chain sets it"),
    (["--minutes", "0"], "--minutes must be positive"),
])
def test_options_the_chain_sets_are_refused_naming_them(folders, tmp_path, capsys, extra, message):
    assert main(["default", "--data", *map(str, folders), "--out", str(tmp_path / "r"), "--dry-run", *extra]) == 2
    assert message in capsys.readouterr().err


def test_footage_folders_need_clips_jsonl_and_distinct_names(folders, tmp_path, capsys):
    (tmp_path / "other" / "footage").mkdir(parents=True)
    assert main(["fast", "--data", str(tmp_path / "other" / "footage"), "--out", str(tmp_path / "r")]) == 2
    assert "no clips.jsonl there; pass the footage folders" in capsys.readouterr().err
    (tmp_path / "other" / "footage" / "clips.jsonl").write_text("")
    assert main(["fast", "--data", str(folders[0]), str(tmp_path / "other" / "footage"), "--out",
                 str(tmp_path / "r")]) == 2
    assert "--data folders need distinct names" in capsys.readouterr().err
