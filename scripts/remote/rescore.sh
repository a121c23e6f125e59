#!/usr/bin/env bash
# Issue 79's re-scoring on one lent GPU machine: the quality figures of README's table through evaluation/ at the
# user's defaults, for both shipped networks along each engine route (CUDA graphs, the default; --eager; --compile),
# so that the routes' agreement (each set's mean within 0.05 dB, each clip within 0.2) is read off one job's files,
# and the peers beside them once.
#
#   HOLD=FOLDER MIDDLEBURY=FOLDER PEERS=FOLDER bash scripts/remote/rescore.sh OUTPUT [PART ...]
#
# PARTs (default ours, peers, fresh, in turn): ours (both networks along the three routes), peers (the RIFE
# releases on the same sets), fresh (the confirmation set, `--set fresh`: ours as run.py runs it and the peers, pairs
# only), compiled (the --compile route beside CUDA graphs on pairs, the video path, Middlebury and patterns: a process per
# network, and one for the patterns; each measure's two routes one after the other). In loan 11 fresh took 62 s and ours ran past a call's 600 s, its compiled route compiling
# for each of the held-out set's frame sizes (F73), so give ours, or compiled, a call of its own.
#
# HOLD holds the staged footage and footage2 (the held-out clips at least: `training.stage pack --held-out-only`),
# MIDDLEBURY the Middlebury "other" set, PEERS the unpacked peers_pack.sh parts (put on PYTHONPATH). The routes run
# side by side (a third of the cores each), their measures one after another; the peers after them. The pattern
# set runs without its filmed scenes there (they need ffmpeg, which that machine lacks). Results:
# OUTPUT/{pairs,video,middlebury,patterns}_{graphs,eager,compile}*.json, the peers' likewise, and each run's last
# lines in OUTPUT/*.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${1:?the output folder, then the parts}
shift
hold=${HOLD:-$HOME/vfi/hold}
middlebury=${MIDDLEBURY:-$HOME/vfi/middlebury}
export PYTHONPATH=${PEERS:-/tmp/peers}${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out"
export OMP_NUM_THREADS=$(( $(nproc) / 3 > 0 ? $(nproc) / 3 : 1 ))
ours=(softsplat_vfi/weights/network.safetensors softsplat_vfi/weights/fast.safetensors)
holdout=(python3 -m training.holdout --data "$hold/footage" "$hold/footage2")

measure() {  # NAME COMMAND...: the command's output in OUTPUT/NAME.txt
    local name=$1
    shift
    "$@" > "$out/$name.txt" 2>&1 || echo "FAILED: $name" >> "$out/failed.txt"
}

route() {  # ROUTE [FLAGS...]: every measure of ours along one engine route
    local route=$1
    shift
    measure "pairs_$route" "${holdout[@]}" --weights "${ours[@]}" "$@" --json "$out/pairs_$route.json"
    measure "video_$route" "${holdout[@]}" --weights "${ours[@]}" --motion quadratic "$@" \
        --json "$out/video_$route.json"
    for model in network fast; do
        measure "middlebury_${route}_$model" python3 benchmark_middlebury.py --data "$middlebury" --model "$model" \
            "$@" --json "$out/middlebury_${route}_$model.json"
    done
    measure "patterns_$route" python3 -m bench.patterns --weights "${ours[@]}" --no-camera "$@" \
        --json "$out/patterns_$route.json"
}

peers=(rife-4.26 rife-3.1 rife-4.6)

part_ours() {
    route graphs & a=$!
    route eager --eager & b=$!
    route compile --compile & c=$!
    wait $a $b $c
}

part_peers() {
    measure pairs_peers "${holdout[@]}" --peer "${peers[@]}" --json "$out/pairs_peers.json"
    for peer in "${peers[@]}"; do
        measure "middlebury_$peer" python3 benchmark_middlebury.py --data "$middlebury" --peer "$peer" \
            --json "$out/middlebury_$peer.json"
    done
    measure patterns_peers python3 -m bench.patterns --peer "${peers[@]}" --no-camera \
        --json "$out/patterns_peers.json"
}

both_routes() {  # NAME COMMAND...: the command along CUDA graphs, then with --compile; ROUTE in NAME names each
    local name=$1
    shift
    measure "${name/ROUTE/graphs}" "$@" --json "$out/${name/ROUTE/graphs}.json"
    measure "${name/ROUTE/compile}" "$@" --compile --json "$out/${name/ROUTE/compile}.json"
}

part_compiled() {  # the compiled route beside CUDA graphs: a process per network, each measure compiled right after
    # its graph-route twin (so that the two are compared clip by clip, scene by scene), and the pattern set in a
    # third; two threads each (compiling is mostly CPU). Inductor's cache (/tmp) serves the video path the pairs'
    # kernels, so a network's process compiles each frame size once.
    local OMP_NUM_THREADS=2 pids=() model
    for model in network fast; do
        (
            w=softsplat_vfi/weights/$model.safetensors
            both_routes "pairs_ROUTE_$model" "${holdout[@]}" --weights "$w"
            both_routes "video_ROUTE_$model" "${holdout[@]}" --weights "$w" --motion quadratic
            both_routes "middlebury_ROUTE_$model" python3 benchmark_middlebury.py --data "$middlebury" --model "$model"
        ) & pids+=($!)
    done
    both_routes patterns_ROUTE python3 -m bench.patterns --weights "${ours[@]}" --no-camera & pids+=($!)
    wait "${pids[@]}"
}

part_fresh() {  # ours and the peers side by side, each with half the cores
    local OMP_NUM_THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
    measure fresh_ours "${holdout[@]}" --set fresh --weights "${ours[@]}" --json "$out/fresh_ours.json" & a=$!
    measure fresh_peers "${holdout[@]}" --set fresh --peer "${peers[@]}" --json "$out/fresh_peers.json" & b=$!
    wait $a $b
}

[ $# -gt 0 ] || set -- ours peers fresh
for part in "$@"; do  # every part named checked before the first runs
    case $part in
        ours | peers | fresh | compiled) ;;
        *) echo "unknown part $part: give ours, peers, fresh or compiled" >&2; exit 2 ;;
    esac
done
for part in "$@"; do "part_$part"; done
for f in "$out"/*.txt; do echo "== $(basename "$f" .txt)"; tail -3 "$f"; done
[ ! -f "$out/failed.txt" ]
