"""Middlebury interpolation benchmark (the published protocol: evaluation/middlebury.py).

    python benchmark_middlebury.py --data ../shared/data/middlebury [--json out.json]
    python benchmark_middlebury.py --data ../shared/data/middlebury --peer rife-4.26   # a RIFE release

Ours runs as run.py runs it with the same flags (precision auto, the flow scale the weights file states), on whole
frames as the protocol scores them; the first line printed says how. Per sequence: PSNR and SSIM on the uint8 output,
and the detail kept, the output's mean absolute Laplacian over the truth's (below 1 the output is softer).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from softsplat_vfi.engine.options import DefaultsFormatter, cli_message, device_for, show_notes
from evaluation.methods import add_engine_flags, engine_options, ours, peer
from evaluation.middlebury import MIDDLEBURY, evaluate, find_sequences
from evaluation.peers import PEERS


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Middlebury benchmark (PSNR/SSIM on uint8 output).",
                                formatter_class=DefaultsFormatter)
    p.add_argument("--data", type=Path, default=Path("middlebury"), help="folder of <Sequence>/frame10.png, ...")
    add_engine_flags(p)
    p.add_argument("--peer", default=None, choices=list(PEERS),
                   help="score a RIFE release instead of our weights (its wheel installed: evaluation/peers.py)")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    try:
        find_sequences(args.data)  # before the network loads: a wrong --data is said at once
        method = peer(args.peer, device_for(args)) if args.peer else ours(engine_options(args, MIDDLEBURY))
        print(MIDDLEBURY.header(method), flush=True)
        result = evaluate(method, args.data)
    except ValueError as exc:  # what the user can fix (images, weights, options, a missing peer wheel)
        print(f"error: {cli_message(exc)}", file=sys.stderr)
        return 2
    result.update(method.settings, method=method.label)
    if args.peer:
        result.update(peer=args.peer)
    else:
        result.update(weights=method.label)
    print(f"mean         PSNR {result['psnr']:6.2f}  SSIM {result['ssim']:.4f}  detail {result['detail']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
