# Sourced by the device scripts that start training or torchrun processes, before they start any.
# NVLink multicast stays off in every process started here (NCCL, PyTorch's symmetric memory, NVSHMEM): on the
# lent multi-GPU hosts a program using it can put GPUs that others share out of service (docs/training.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# study.sh stops training at LIMIT seconds (540 by default). --minutes counts training only: the chunk runs on to
# its last validation, and set-up and shutdown come on top (four GPUs: a resume of 8.0 minutes (session 49) and an
# init of 7.5 (session 50) were still shutting down at 540 s, their states saved; 5.5 minutes trained 5.92 in a
# 384-s call), so warn where MINUTES leave less than 120 s of LIMIT. Once per command: arms.sh warns for its arms,
# and the study.sh it starts for each arm stays quiet.
warn_overrun() {  # MINUTES LIMIT
    [ -z "${OVERRUN_CHECKED:-}" ] || return 0
    export OVERRUN_CHECKED=1
    if awk -v m="$1" -v l="$2" 'BEGIN { exit !(m * 60 + 120 > l) }'; then
        echo "warning: $1 minutes plus about 120 s of set-up, last validation and shutdown exceed study.sh's" \
            "${2}-s limit: a run stopped there keeps the state of its last validation (resume from it)" >&2
    fi
}
