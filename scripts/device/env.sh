# Sourced by the device scripts that start training or torchrun processes, before they start any.
# NVLink multicast stays off in every process started here (NCCL, PyTorch's symmetric memory, NVSHMEM): on the
# lent multi-GPU hosts a program using it can put GPUs that others share out of service (docs/training.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
