# Sourced by the device scripts: NCCL from PyTorch's package, NVLink multicast off, mpirun flags for root.
export NCCL_NVLS_ENABLE=0
nccl_dir=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null || true)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
MPIRUN=(mpirun --allow-run-as-root --bind-to none -np "${NP:-2}")
BIN=${BIN:-.device/bin}
OUT=${OUT:-/tmp/dfccl-out}
mkdir -p "$OUT"
