# Sourced by the device scripts that start training or torchrun processes, before they start any.
# NVLink multicast stays off in every process started here (NCCL, PyTorch's symmetric memory, NVSHMEM): on the
# lent multi-GPU hosts a program using it can put GPUs that others share out of service (docs/training.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# study.sh stops training at LIMIT seconds (540 by default). --minutes counts training only: the chunk runs on to
# its last validation, and set-up and shutdown come on top (about a minute of set-up with four arms starting
# together; a four-GPU torchrun chunk of 1.0 minute on the small held-out set returned after 80-86 s), so warn where
# MINUTES leave less than 120 s of LIMIT. Once per command: arms.sh warns for its arms,
# and the study.sh it starts for each arm stays quiet.
warn_overrun() {  # MINUTES LIMIT
    [ -z "${OVERRUN_CHECKED:-}" ] || return 0
    export OVERRUN_CHECKED=1
    if awk -v m="$1" -v l="$2" 'BEGIN { exit !(m * 60 + 120 > l) }'; then
        echo "warning: $1 minutes plus about 120 s of set-up, last validation and shutdown exceed study.sh's" \
            "${2}-s limit: a run stopped there keeps the state of its last validation (resume from it)" >&2
    fi
}
