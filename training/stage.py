"""Stage footage on a rented GPU machine that keeps nothing between jobs and takes a size-limited upload.

Here, split the footage folders into bundles of whole clips that each fit one upload (``--max-mib``: the upload's
limit less what else goes with it, such as the working tree), each folder's clips.jsonl in every bundle that holds
some of its clips:

    python -m training.stage pack --data FOOTAGE FOOTAGE2 --out .data/bundles --max-mib 31

``--min-short-side 512`` packs only the training clips a 512-px crop can use (the ``quality`` stages' recipes) and
every held-out clip (they validate), in fewer bundles; ``--held-out-only`` the held-out clips alone (to score weights
with ``training.holdout`` there). Each bundle's clips.jsonl then lists only the selected clips (of every bundle), so
that ``check`` finds the selection complete once all its bundles are staged.

There, one job per uploaded bundle while the machine is held: copy it out of the uploaded folder and decode its
clips into the frame cache that ``train.py --frame-cache`` memory-maps:

    python -m training.stage unpack .data/bundles/N --dest ~/vfi/data --cache /dev/shm/vfi-cache

and before training, check that every clip of every clips.jsonl is there and decoded (a machine given back and
rented again comes bare; stage again then):

    python -m training.stage check --dest ~/vfi/data --cache /dev/shm/vfi-cache
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional

from training.listing import clip_entries, is_footage_folder, listing_path

MIB = 2 ** 20


Selection = Callable[[dict], bool]  # which clips.jsonl entries to pack


def select_clips(min_short_side: int = 0, held_out_only: bool = False) -> Selection:
    """Held-out clips always; training clips unless ``held_out_only``, and only those at least ``min_short_side``
    px on their short side (clips.jsonl's stored width and height)."""
    from training.holdout import is_holdout

    def keep(entry: dict) -> bool:
        if is_holdout(entry):
            return True
        return not held_out_only and min(entry["width"], entry["height"]) >= min_short_side

    return keep


def plan_bundles(folders: List[Path], max_bytes: int, keep: Optional[Selection] = None) -> List[List[Path]]:
    """Clip files (relative to the folders' parent) grouped into bundles of at most ``max_bytes``, in
    clips.jsonl order, each clip whole (only the entries ``keep`` accepts, if given)."""
    bundles: List[List[Path]] = [[]]
    size = 0
    for folder in folders:
        for entry in clip_entries(folder):
            if keep is not None and not keep(entry):
                continue
            path = folder / entry["file"]
            nbytes = path.stat().st_size
            if nbytes > max_bytes:
                raise ValueError(f"{path} is larger than a bundle ({nbytes / MIB:.1f} MiB): raise --max-mib")
            if size + nbytes > max_bytes and bundles[-1]:
                bundles.append([])
                size = 0
            bundles[-1].append(Path(folder.name) / entry["file"])
            size += nbytes
    return bundles


def pack(folders: List[Path], out: Path, max_mib: float, keep: Optional[Selection] = None) -> List[Path]:
    """Write the bundles under ``out`` (0, 1, ...): copies of the clips, and in each bundle every folder's
    clips.jsonl, so that ``check`` on a partly staged machine also names the clips of a folder no bundle has
    reached yet (with ``keep``, only the clips it accepts, in the clips and in every clips.jsonl)."""
    if out.exists():
        shutil.rmtree(out)
    sources = {folder.name: folder for folder in folders}
    # every folder's list goes into every bundle: a check sees the folders still to come
    lists = {name: listing_path(folder).read_bytes() if keep is None else
             "".join(json.dumps(e) + "\n" for e in clip_entries(folder) if keep(e)).encode()
             for name, folder in sources.items()}
    written = []
    for i, files in enumerate(plan_bundles(folders, int(max_mib * MIB), keep)):
        bundle = out / str(i)
        for rel in files:
            target = bundle / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sources[rel.parts[0]] / Path(*rel.parts[1:]), target)
        for name, listing in lists.items():
            (bundle / name).mkdir(parents=True, exist_ok=True)
            listing_path(bundle / name).write_bytes(listing)
        written.append(bundle)
    return written


def unpack(bundle: Path, dest: Path, cache: Path, workers: int = 16) -> int:
    """Copy a bundle's clips under ``dest`` and decode them into ``cache``; returns the number of clips."""
    from training.data import cached_frames

    jobs = []
    for folder in sorted(p for p in bundle.iterdir() if p.is_dir()):
        target = dest / folder.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(listing_path(folder), listing_path(target))
        for entry in clip_entries(folder):
            if (folder / entry["file"]).is_file():
                (target / entry["file"]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / entry["file"], target / entry["file"])
                jobs.append((target, entry))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: cached_frames(job[0], job[1], cache), jobs))
    return len(jobs)


def check(dest: Path, cache: Path) -> Dict[str, List[str]]:
    """Per footage folder under ``dest``: the clips listed but not staged or not decoded (empty lists: ready)."""
    report = {}
    for folder in sorted(p for p in dest.iterdir() if is_footage_folder(p)):
        report[folder.name] = [entry["file"] for entry in clip_entries(folder)
                               if not (folder / entry["file"]).is_file()
                               or not (cache / folder.name / entry["file"]).with_suffix(".npy").is_file()]
    return report


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="split footage folders into bundles that each fit one upload")
    pk.add_argument("--data", type=Path, nargs="+", required=True)
    pk.add_argument("--out", type=Path, required=True)
    pk.add_argument("--max-mib", type=float, default=31.0,
                    help="largest bundle: the upload limit less what else goes with it")
    pk.add_argument("--min-short-side", type=int, default=0, metavar="PX",
                    help="only training clips at least PX on their short side (and every held-out clip)")
    pk.add_argument("--held-out-only", action="store_true", help="only the held-out clips")
    up = sub.add_parser("unpack", help="on the GPU machine: copy an uploaded bundle out and decode it")
    up.add_argument("bundle", type=Path)
    up.add_argument("--dest", type=Path, required=True)
    up.add_argument("--cache", type=Path, required=True)
    ck = sub.add_parser("check", help="on the GPU machine: is every clip staged and decoded?")
    ck.add_argument("--dest", type=Path, required=True)
    ck.add_argument("--cache", type=Path, required=True)
    args = p.parse_args(argv)
    if args.command == "pack":
        keep = None
        if args.min_short_side or args.held_out_only:
            keep = select_clips(args.min_short_side, args.held_out_only)
        for bundle in pack(args.data, args.out, args.max_mib, keep):
            size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
            print(f"{bundle}: {size / MIB:.1f} MiB, {sum(1 for _ in bundle.rglob('*.mp4'))} clips")
        return 0
    if args.command == "unpack":
        count = unpack(args.bundle, args.dest.expanduser(), args.cache.expanduser())
        print(f"staged and decoded {count} clips from {args.bundle}")
        return 0
    dest, cache = args.dest.expanduser(), args.cache.expanduser()
    if not dest.is_dir():
        print(f"not staged: {dest} does not exist", file=sys.stderr)
        return 1
    report = check(dest, cache)
    ready = bool(report) and not any(report.values())
    for name, missing in report.items():
        print(f"{name}: {'ready' if not missing else f'{len(missing)} clips missing, e.g. {missing[0]}'}")
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
