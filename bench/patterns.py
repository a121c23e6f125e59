"""Scores on the repeated-pattern set (evaluation/patterns.py: rendered scenes whose middle frame is exact, the static
ones also as a camera films them: noise, an H.264 round trip, a shaking camera).

    python -m bench.patterns --weights weights/network.safetensors weights/fast.safetensors --peer rife-4.26
    python -m bench.patterns --weights weights/network.safetensors --hold-still both   # the still guard's effect

Ours runs as run.py runs it with the same flags (an ``engine.Interpolator``: precision auto, the flow scale the
weights file states), whole frames; a header line per method says how. Per method: PSNR, far PSNR and detail over the
exact scenes (static and moving), and far PSNR on the camera-filmed static scenes by kind; with ``--hold-still both``
also the still guard's effect on far PSNR (on minus off) on each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional

from softsplat_vfi.engine.options import DefaultsFormatter, cli_message, show_notes
from evaluation.methods import HOLD_STILL, add_engine_flags, hold_still_label, methods_of
from evaluation.patterns import CAMERAS, PATTERNS, guard_effect, scenes, score, summarise
from evaluation.peers import PEERS


def _line(label: str, s: Dict[str, float], count: int) -> str:
    filmed = ", ".join(f"{kind} {s[f'far_psnr_{kind}']:.2f}" for kind in CAMERAS)
    return (f"{label}: PSNR {s['psnr']:.2f} (static {s['psnr_static']:.2f}, moving {s['psnr_moving']:.2f}), "
            f"far PSNR {s['far_psnr']:.2f} (worst {s['worst_far_psnr']:.2f}), detail {s['detail']:.3f} "
            f"on {count} scenes; filmed static scenes' far PSNR: {filmed}")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Scores on the repeated-pattern set (exact middle frames).",
                                formatter_class=DefaultsFormatter)
    p.add_argument("--peer", nargs="*", default=[], choices=list(PEERS),
                   help="RIFE releases to score beside them (evaluation/peers.py)")
    add_engine_flags(p, several=True)
    p.add_argument("--quick", action="store_true", help="the static 25 px grid alone (and as cameras film it)")
    p.add_argument("--no-camera", action="store_true",
                   help="the exact scenes alone, without the static scenes as cameras film them")
    p.add_argument("--video", action="store_true",
                   help="our networks along run.py --video's quadratic paths, through the frames at times -1 and 2 "
                        "(the peers on the pair alone, as RIFE tools run)")
    p.add_argument("--hold-still", choices=list(HOLD_STILL), default="on",
                   help="our networks with still, textured neighbourhoods held at zero flow (the default), without "
                        "(a diagnostic), or both, with the guard's effect on each kind of scene")
    p.add_argument("--json", type=Path, default=None, help="write per-scene rows here")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    chosen = scenes(args.quick, camera=not args.no_camera)
    methods = methods_of(args, PATTERNS, args.weights, args.peer, args.hold_still)
    if not methods:
        p.error("name --weights or --peer")
    report = {}
    for label, build in methods:
        try:
            method = build()
            print(PATTERNS.header(method), flush=True)
            rows = score(method, chosen, args.video)
        except ValueError as exc:  # a missing wheel or weights file names its fix
            print(f"error: {cli_message(exc)}", file=sys.stderr)
            return 2
        report[label] = {"summary": summarise(rows), "settings": method.settings, "scenes": rows}
        print(_line(label, report[label]["summary"], len(rows)), flush=True)
    if args.hold_still == "both":
        for path in args.weights:
            on, off = (report[hold_still_label(str(path), hold, "both")] for hold in (True, False))
            on["guard_effect"] = effect = guard_effect(on["summary"], off["summary"])
            print(f"{path}: the still guard's effect on far PSNR (on - off): "
                  + ", ".join(f"{kind} {value:+.2f}" for kind, value in effect.items()) + " dB")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
