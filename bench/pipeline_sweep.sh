#!/usr/bin/env bash
# GPT-2 XL pipeline inference over STAGES stages against one GPU and against
# torch.distributed.pipelining on the same GPUs, for each sequence length
# and micro-batch count: latency per batch, tokens/s, and the bubble
# fraction zrun measures (--profile: each stage's idle share of the batch)
# next to the one the compiler predicts.
#
#   bash bench/pipeline_sweep.sh compile OUT    # here: the plans (zcc, no GPU)
#   bash bench/pipeline_sweep.sh run OUT        # on the GPU machine: the table
#
# STAGES (default 4), SEQS ("256 1024 2048"), MICRO ("4 8 16"), BATCH (32),
# SCHEDULES ("gpipe interleaved": each case under each, interleaved with 2
# chunks a stage; its micro-batch counts must be multiples of STAGES),
# PARTITION (flops: stages of even estimated work; parameters is
# DeepSpeed's default, which leaves the output layer's work uncounted),
# PRESET (gpt2-xl: 48 layers, width 1600, 25 heads, vocabulary 50304; bf16,
# random init). BACKEND=cpu and PRESET=tiny with SKIP_PEERS=1 run the whole
# sweep on the cpu backend (a smoke test of the script). ZCC and ZRUN name
# the binaries (build/bin, build-gpu/bin).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=${1:?usage: pipeline_sweep.sh compile|run OUT}
out=${2:?usage: pipeline_sweep.sh compile|run OUT}
stages=${STAGES:-4}
seqs=${SEQS:-256 1024 2048}
micros=${MICRO:-4 8 16}
schedules=${SCHEDULES:-gpipe interleaved}
partition=${PARTITION:-flops}
batch=${BATCH:-32}
preset=${PRESET:-gpt2-xl}
backend=${BACKEND:-cuda}
python=${PYTHON:-python3}
mkdir -p "$out"

if [ "$mode" = compile ]; then
  zcc=${ZCC:-$root/build/bin/zcc}
  models=${MODELS:-$out.models}  # beside OUT, which stays small enough to carry
  mkdir -p "$models"
  model() { # SEQ ROWS -> the model file (made once; its weights are sizes only)
    local onnx=$models/$preset-s$1-b$2.onnx
    if [ ! -f "$onnx" ] || [ ! -f "$onnx.data" ]; then
      ${COMPILE_PYTHON:-/usr/bin/python3} "$root/examples/models/make_models.py" --model gpt2 \
        --preset "$preset" --gelu tanh --vocab ${VOCAB:-50304} --seq "$1" --batch "$2" --no-loss \
        --external-data --sizes-only -o "$onnx" > /dev/null
    fi
    echo "$onnx"
  }
  compile() { # REPORT ZCC-ARGS...: a plan, its report; zcc's messages on failure
    local report=$1
    shift
    "$zcc" "$@" --infer-precision bf16 --report > "$report" 2> "$report.err" ||
      { cat "$report.err" >&2; exit 1; }
  }
  for seq in $seqs; do
    echo "{\"train_micro_batch_size_per_gpu\": $batch}" > "$out/one.json"
    onnx=$(model "$seq" "$batch")
    compile "$out/one-s$seq.report" "$onnx" -c "$out/one.json" -o "$out/one-s$seq.plan"
    for micro in $micros; do
      if [ $((batch % micro)) -ne 0 ]; then
        echo "pipeline_sweep.sh: $micro micro-batches do not divide the batch of $batch" >&2
        exit 2
      fi
      rows=$((batch / micro))
      onnx=$(model "$seq" "$rows")
      for schedule in $schedules; do
        cat > "$out/$schedule-m$micro.json" <<EOF
{"train_micro_batch_size_per_gpu": $rows, "gradient_accumulation_steps": $micro,
 "pipeline": {"enabled": true, "num_stages": $stages, "schedule": "$schedule",
              "partition_method": "$partition"}}
EOF
        name=$schedule-s$seq-m$micro
        compile "$out/$name.report" "$onnx" -c "$out/$schedule-m$micro.json" \
          --world-size "$stages" -o "$out/$name.plan"
        echo "seq $seq, $micro micro-batches, $schedule: $(grep -m1 'bubble' "$out/$name.report" || true)"
      done
    done
  done
  exit 0
fi

[ "$mode" = run ] || { echo "pipeline_sweep.sh: mode '$mode': expected compile or run" >&2; exit 2; }
zrun=${ZRUN:-$root/build-gpu/bin/zrun}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
results=$out/results.jsonl
: > "$results"
latency() { # LOG -> milliseconds per batch, or null
  local ms
  ms=$(sed -nE 's/.*batch of [0-9]+ samples in ([0-9.]+) ms.*/\1/p' "$1" | tail -1)
  echo "${ms:-null}"
}
for seq in $seqs; do
  ids=$out/ids-s$seq.npy
  $python -c "import sys, numpy as np
np.save(sys.argv[1], np.random.default_rng(0).integers(0, int(sys.argv[2]), (int(sys.argv[3]), int(sys.argv[4]))))" \
    "$ids" "${VOCAB:-50304}" "$batch" "$seq"
  log=$out/one-s$seq.log
  "$zrun" "$out/one-s$seq.plan" --backend "$backend" --weights random --input input_ids="$ids" \
    --repeat 5 --no-outputs > "$log" 2>&1 || tail -3 "$log"
  echo "{\"system\": \"zcc-1gpu\", \"seq\": $seq, \"latency_ms\": $(latency "$log")}" >> "$results"
  for micro in $micros; do
  for schedule in $schedules; do
    name=$schedule-s$seq-m$micro
    plan=$out/$name.plan
    log=$out/$name.log
    "$zrun" "$plan" --backend "$backend" --nproc "$stages" --weights random --input input_ids="$ids" \
      --repeat 5 --no-outputs --comm-timeout 120 > "$log" 2>&1 || tail -3 "$log"
    # The bubble: each stage's idle share over profiled runs (one line per
    # stage; on cuda each rank prints its own).
    "$zrun" "$plan" --backend "$backend" --nproc "$stages" --weights random --input input_ids="$ids" \
      --repeat 3 --no-outputs --profile 1 --comm-timeout 120 > "$log.profile" 2>&1 || tail -3 "$log.profile"
    measured=$(sed -nE 's/^stage [0-9]+ \(rank [0-9]+\):.* idle ([0-9.]+)%$/\1/p' "$log.profile" |
      awk -v stages="$stages" '{ s += $1; n++ } END { if (n == stages) printf "%.3f", s / n / 100; else print "null" }')
    predicted=null
    [ -f "$out/$name.report" ] &&
      predicted=$(sed -nE 's/.*bubble fraction ([0-9.]+).*/\1/p' "$out/$name.report" | head -1)
    echo "{\"system\": \"zcc-pipeline\", \"schedule\": \"$schedule\", \"seq\": $seq, \"micro\": $micro, \"latency_ms\": $(latency "$log"), \"bubble_measured\": $measured, \"bubble_predicted\": ${predicted:-null}}" >> "$results"
  done
    if [ -z "${SKIP_PEERS:-}" ]; then
      torchrun --nproc-per-node "$stages" "$root/bench/peers.py" --system pipeline --preset "$preset" \
        --batch "$batch" --chunks "$micro" --seq "$seq" 2> "$out/torch-s$seq-m$micro.err" |
        tail -1 | $python -c "
import json, sys
line = sys.stdin.read().strip()
row = json.loads(line) if line else {}
print(json.dumps({'system': 'torch-pipeline', 'seq': $seq, 'micro': $micro,
                  'latency_ms': row['latency_s'] * 1e3 if row else None}))" >> "$results" ||
        tail -3 "$out/torch-s$seq-m$micro.err"
    fi
  done
done
$python - "$results" "$batch" "$stages" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
batch, stages = int(sys.argv[2]), int(sys.argv[3])
one = {r["seq"]: r["latency_ms"] for r in rows if r["system"] == "zcc-1gpu"}
torch = {(r["seq"], r["micro"]): r["latency_ms"] for r in rows if r["system"] == "torch-pipeline"}
fmt = lambda x, f="{:.1f}": f.format(x) if x is not None else "–"
tps = lambda seq, ms: batch * seq / (ms / 1e3) if ms else None
ratio = lambda a, b: a / b if a and b else None
print(f"| seq | micro-batches | schedule | zcc 1 GPU ms | zcc {stages} stages ms | tokens/s | torch {stages} stages ms | tokens/s "
      f"| latency 1 GPU / {stages} stages | tokens/s zcc / torch | bubble predicted | bubble measured |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["system"] != "zcc-pipeline":
        continue
    seq, micro, ms = r["seq"], r["micro"], r["latency_ms"]
    single, peer = one.get(seq), torch.get((seq, micro))
    print(f"| {seq} | {micro} | {r['schedule']} | {fmt(single)} | {fmt(ms)} | {fmt(tps(seq, ms), '{:,.0f}')} | {fmt(peer)} "
          f"| {fmt(tps(seq, peer), '{:,.0f}')} | {fmt(ratio(single, ms), '{:.2f}')} "
          f"| {fmt(ratio(peer, ms), '{:.2f}')} | {fmt(r['bubble_predicted'], '{:.3f}')} "
          f"| {fmt(r['bubble_measured'], '{:.3f}')} |")
PY
