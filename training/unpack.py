"""Turn the output folder of a training chunk on a remote GPU machine into a state folder the next chunk resumes.

``scripts/remote/chunk.sh OUTPUT ...`` leaves, under OUTPUT, ``train/state_model.safetensors`` and
``train/state_optim.pt`` (full precision) and ``small.tar`` (its ``t/`` folder: configs, progress, loss log, the
moving average and, where a step beat the kept one, ``weights.safetensors``). Once OUTPUT is copied back here, this
puts them together:

    python -m training.unpack OUTPUT runs/46 --resume-dir .data/r46

``runs/46`` gets everything (to read or export from); ``--resume-dir`` gets only what ``train.py --resume`` reads,
without the weights file, so that the next chunk's upload stays small.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
from pathlib import Path
from typing import List, Optional

from training.state import REQUIRED, RESUME_FILES


def unpack_chunk(returned: Path, state: Path, resume_dir: Optional[Path] = None) -> List[str]:
    """Unpack ``returned`` (a chunk's output folder: small.tar and train/) into ``state``; with ``resume_dir``, copy
    the files a resume needs there too. Returns the names written to ``state``."""
    returned, state = Path(returned), Path(state)
    tar_path = returned / "small.tar"
    if not tar_path.is_file():
        raise ValueError(f"{returned} has no small.tar: pass the output folder of scripts/remote/chunk.sh, as "
                         f"copied back from the GPU machine")
    if state.exists() and any(state.iterdir()):
        raise ValueError(f"{state} is not empty: unpack each chunk into a new folder (e.g. runs/<chunk>)")
    state.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            # only plain files directly under the tar's one folder (t/NAME): nothing that could land elsewhere
            if not member.isfile() or len(name.parts) != 2 or name.parts[1] in ("", ".", ".."):
                continue
            source = tar.extractfile(member)
            if source is not None:
                (state / name.parts[1]).write_bytes(source.read())
    for path in sorted((returned / "train").glob("state_*")):
        shutil.copyfile(path, state / path.name)
    written = sorted(p.name for p in state.iterdir())
    missing = [name for name in REQUIRED if name not in written]
    if missing:
        raise ValueError(f"{returned} lacks {', '.join(missing)}: the chunk may have stopped before its first "
                         f"checkpoint (look at its output)")
    if resume_dir is not None:
        resume_dir = Path(resume_dir)
        resume_dir.mkdir(parents=True, exist_ok=True)
        for name in RESUME_FILES:
            if (state / name).is_file():
                shutil.copyfile(state / name, resume_dir / name)
    return written


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("returned", type=Path, help="the output folder of scripts/remote/chunk.sh, copied back")
    p.add_argument("state", type=Path, help="a new folder for the whole state")
    p.add_argument("--resume-dir", type=Path, default=None,
                   help="also copy what train.py --resume reads here (no weights file: a smaller upload)")
    args = p.parse_args(argv)
    try:
        written = unpack_chunk(args.returned, args.state, args.resume_dir)
    except (ValueError, OSError, tarfile.TarError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {args.state}: {', '.join(written)}"
          + (f"; resume state in {args.resume_dir}" if args.resume_dir else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
