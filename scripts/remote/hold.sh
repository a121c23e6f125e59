# Sourced by score.sh after env.sh: the held-out bundle (`python -m training.stage pack --held-out-only`) unpacks
# under ~/vfi/hold, where later jobs on the same machine find it, and training.holdout scores weights there in bf16.
hold=~/vfi/hold

stage_holdout() {  # BUNDLE
    python3 -m training.stage unpack "$1" --dest "$hold" --cache /dev/shm/vfi-hold-cache | tail -1
}

holdout_bf16() {  # [training.holdout options]
    python3 -m training.holdout --data "$hold/footage" "$hold/footage2" --device cuda --bf16 "$@"
}
