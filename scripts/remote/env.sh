# Sourced by the scripts here that start training or evaluation processes, before they start any.
# NVLink multicast stays off in every process started here (NCCL, PyTorch's symmetric memory, NVSHMEM): on a
# multi-GPU host shared with others, a program using it can put GPUs that others use out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
