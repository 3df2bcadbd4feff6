#!/usr/bin/env bash
# Builds zcc-bench-attention once per tiling of the tensor-core attention
# kernels (the ZCC_ATTENTION_* definitions in kernels/cuda/Attention.cu) and
# times each on the attention shapes of bench/attention.py, side by side:
#
#   bash bench/attention_sweep.sh [OUT] [VARIANT ...]
#
# A variant is a comma-separated list of NAME=VALUE (NAME without the
# ZCC_ATTENTION_ prefix), or "default". Needs nvcc (CUDA 12.4 or later);
# runs on the GPU machine. Prints one table row per variant and shape.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/zcc-attention-sweep}
shift || true
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(default)
nvcc=${NVCC:-nvcc}
repeats=${REPEATS:-20}
mkdir -p "$out"
# name batch*heads sequence head-size
shapes=("gpt2-medium 128 1024 64" "gpt2-xl 200 1024 64" "gpt-6.7b 128 1024 128" "gpt2-xl-T2048 100 2048 64")

for i in "${!variants[@]}"; do
  defs=()
  if [ "${variants[$i]}" != default ]; then
    IFS=, read -ra pairs <<< "${variants[$i]}"
    for pair in "${pairs[@]}"; do defs+=("-DZCC_ATTENTION_$pair"); done
  fi
  "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90,code=sm_90 -I"$root" \
    "${defs[@]}" -Xptxas -v "$root/bench/attention.cpp" "$root/kernels/cuda/Attention.cu" \
    -o "$out/bench-$i" > "$out/build-$i.log" 2>&1 &
done
wait

printf "%-60s %-14s %9s %9s %9s\n" variant shape "fwd ms" "bwd ms" "total"
for i in "${!variants[@]}"; do
  if [ ! -x "$out/bench-$i" ]; then
    echo "${variants[$i]}: build failed"; grep -m3 error "$out/build-$i.log"; continue
  fi
  spills=$(grep -c "[1-9][0-9]* bytes spill" "$out/build-$i.log")
  for shape in "${shapes[@]}"; do
    read -r name heads seq head <<< "$shape"
    line=$("$out/bench-$i" "$heads" "$seq" "$seq" "$head" 1 bf16 "$repeats") || { echo "${variants[$i]} $name: failed"; continue; }
    python3 - "${variants[$i]}" "$name" "$spills" "$line" <<'PY'
import json, sys
variant, name, spills, line = sys.argv[1:5]
r = json.loads(line)
label = variant + (f" ({spills} spilling)" if spills != "0" else "")
print(f"{label:60} {name:14} {r['forward_ms']:9.3f} {r['backward_ms']:9.3f} {r['forward_ms'] + r['backward_ms']:9.3f}")
PY
  done
done
