#!/usr/bin/env bash
# Imports a gpt2-xl-sized decoder (48 layers, width 1600, 1.6 B parameters,
# weights as ONNX external data) and reports zcc's wall time and peak memory.
# Target: under 10 s and 2 GB on the 2-core development machine; the weights
# are never read at compile time, only their size is checked.
#
#   bash bench/import_gpt2xl.sh [WORKDIR]     (default /tmp/zcc-bench; ~6.5 GB of disk)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-/tmp/zcc-bench}"
zcc="${ZCC:-$root/build/bin/zcc}"
mkdir -p "$work"
model="$work/gpt2-xl.onnx"
if [[ ! -f "$model" ]]; then
  echo "writing $model (once; takes a few minutes)"
  /usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --preset gpt2-xl \
    --external-data -o "$model"
fi
/usr/bin/time -f "%e %M" -o "$work/time.txt" \
  "$zcc" "$model" --emit graph -c "$root/examples/ds_zero3_offload.json" > "$work/graph.mlir"
read -r seconds kib < "$work/time.txt"
params=$(/usr/bin/python3 "$root/test/Import/Onnx/Inputs/count_params.py" < "$work/graph.mlir")
echo "gpt2-xl import: ${seconds} s, peak RSS $((kib / 1024)) MiB; $params"
awk -v s="$seconds" -v k="$kib" 'BEGIN {
  printf "targets: time %.2f of 10 s (%s), memory %.0f of 2048 MiB (%s)\n", s, (s < 10 ? "met" : "MISSED"),
         k / 1024, (k / 1024 < 2048 ? "met" : "MISSED") }'
