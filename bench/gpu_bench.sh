#!/usr/bin/env bash
# zcc against its peers on the GPUs of one node, side by side.
#
#   bash bench/gpu_bench.sh compile [OUT]   here (zcc, no GPU): models (sizes
#                                           only) and plans into OUT
#                                           (default build-bench)
#   bash bench/gpu_bench.sh run [OUT]       on the GPU machine, after
#                                           tools/gpu/check.sh built zrun:
#                                           every case, then the table
#
# Cases (GPT-2-style decoder with GPT-2's tanh GELU, as the peers use,
# vocabulary 50304, sequence 1024, bf16, AdamW, random init, NPROC GPUs,
# default 2): gpt2-medium and gpt2-xl at micro-batch 8 per GPU with
# ZeRO 0 (against PyTorch DDP) and ZeRO 3 (against FSDP2); a 6.7 B model (32
# layers, width 4096) at micro-batch 4 with ZeRO 3 against FSDP2. Each run
# prints tokens/s, TFLOP/s per GPU and peak memory per GPU; the table gives
# zcc / peer for each. Pipeline inference: gpt2-xl in bf16, a batch of 32
# in 8 micro-batches over 2 stages, zcc against torch.distributed.pipelining
# (and one GPU running the whole batch).
#
# A stage written 3off (e.g. CASES="gpt-13b:3off:4 gpt-13b:3:4" on 8 GPUs)
# is the ZeRO-3 guide's run: zero3off_fp16_mb4.json (optimizer and parameter
# offload to pinned host memory, fp16 with the guide's loss scaler, a
# recomputation checkpoint per block; WarmupLR over 10 steps, where the
# guide's 1000 would hold a 20-step run's learning rate near zero), compiled to fit
# --device-memory-limit DEVICE_MEMORY_LIMIT (default 16GiB); its row has no
# peer, and gives the compiler's predicted peak beside the measured one.
# 3inf is the same run with ZeRO-Infinity's NVMe tier:
# zero3inf_fp16_mb4.json puts the optimizer state and the parameters
# (max_in_cpu 0) in each rank's swap file under nvme_path (zrun
# --nvme-path overrides it).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?compile or run}
out=${2:-$root/build-bench}
python=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nproc=${NPROC:-2}
cases=${CASES:-"gpt2-medium:0:8 gpt2-medium:3:8 gpt2-xl:0:8 gpt2-xl:3:8 gpt-6.7b:3:4"}
steps=${STEPS:-8}
# The pipeline inference's configs (bench/configs/NAME.json), each a row
# against torch pipelining: DeepSpeed's defaults (GPipe, stages cut by
# parameter counts, as torch's even cut of the blocks), and zcc's
# interleaved schedule over stages cut by estimated work (2 and 6 chunks).
pipeline_configs=${PIPELINE_CONFIGS:-"pipeline_infer pipeline_infer_interleaved pipeline_infer_interleaved6"}
# More zrun options for every zcc run (e.g. --no-graphs).
ZRUN_ARGS=${ZRUN_ARGS:-}
# More zcc options for every training plan (e.g. --recompute always).
ZCC_ARGS=${ZCC_ARGS:-}

size_args() {
  case $1 in
    gpt2-medium) echo "--preset gpt2-medium" ;;
    gpt2-xl) echo "--preset gpt2-xl" ;;
    gpt-6.7b) echo "--layers 32 --width 4096 --heads 32" ;;
    gpt-13b) echo "--layers 40 --width 5120 --heads 40" ;;
  esac
}

if [ "$mode" = compile ]; then
  zcc=${ZCC:-$root/build/bin/zcc}
  models=${MODELS:-/tmp/zcc-bench-models}
  mkdir -p "$out" "$models"
  for item in $cases; do
    IFS=: read -r model stage micro <<< "$item"
    onnx=$models/$model-mb$micro-tanh.onnx
    [ -f "$onnx" ] || /usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --gelu tanh \
      $(size_args "$model") --vocab 50304 --seq 1024 --batch "$micro" --external-data --sizes-only -o "$onnx"
    config=$root/bench/configs/zero${stage}_bf16_mb$micro.json limit=()
    if [ "$stage" = 3off ] || [ "$stage" = 3inf ]; then
      config=$root/bench/configs/zero${stage}_fp16_mb$micro.json
      limit=(--device-memory-limit "${DEVICE_MEMORY_LIMIT:-16GiB}")
    fi
    "$zcc" "$onnx" -c "$config" --world-size "$nproc" "${limit[@]}" $ZCC_ARGS \
      --report -o "$out/$model-z$stage.plan" 2>"$out/$model-z$stage.err" > "$out/$model-z$stage.report" ||
      { echo "zcc $model ZeRO-$stage failed:"; tail -3 "$out/$model-z$stage.err"; }
    echo "$model ZeRO-$stage: $(grep 'arena (total)' "$out/$model-z$stage.report")"
    grep -h "(--recompute)" "$out/$model-z$stage.report" || true
  done
  if [ "$nproc" -lt 2 ]; then
    # One GPU: gpt2-xl inference in bf16 of the whole batch of 32 at once,
    # against torch on one GPU (the pipeline rows need two).
    onnx=$models/gpt2-xl-infer-mb32-tanh.onnx
    [ -f "$onnx" ] || /usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --preset gpt2-xl --gelu tanh \
      --vocab 50304 --seq 1024 --batch 32 --no-loss --external-data --sizes-only -o "$onnx"
    "$zcc" "$onnx" -c "$root/bench/configs/infer_one_mb32.json" --infer-precision bf16 --report \
      -o "$out/gpt2-xl-infer.plan" 2>/dev/null > "$out/gpt2-xl-infer.report"
    echo "gpt2-xl inference, one GPU: $(grep 'arena (total)' "$out/gpt2-xl-infer.report")"
    exit 0
  fi
  # Pipeline inference: gpt2-xl, bf16, a batch of 32 in 8 micro-batches of
  # 4 over 2 stages (one GPU each), once per config of PIPELINE_CONFIGS.
  onnx=$models/gpt2-xl-infer-mb4-tanh.onnx
  [ -f "$onnx" ] || /usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --preset gpt2-xl --gelu tanh \
    --vocab 50304 --seq 1024 --batch 4 --no-loss --external-data --sizes-only -o "$onnx"
  for config in $pipeline_configs; do
    "$zcc" "$onnx" -c "$root/bench/configs/$config.json" --world-size 2 --infer-precision bf16 --report \
      -o "$out/gpt2-xl-$config.plan" 2>/dev/null > "$out/gpt2-xl-$config.report"
    echo "gpt2-xl $config: $(head -1 "$out/gpt2-xl-$config.report"), $(grep -o 'bubble fraction [0-9.]*' "$out/gpt2-xl-$config.report")"
  done
  exit 0
fi

zrun=${ZRUN:-$root/build-gpu/bin/zrun}
results=$out/results.jsonl
: > "$results"
for item in $cases; do
  IFS=: read -r model stage micro <<< "$item"
  plan=$out/$model-z$stage.plan
  log=$out/$model-z$stage
  "$zrun" "$plan" --backend cuda --nproc "$nproc" --weights random --steps "$steps" --comm-timeout "${COMM_TIMEOUT:-60}" \
    --log-json "$log.jsonl" --memory-report $ZRUN_ARGS > "$log.log" 2>&1 || { echo "zcc $model ZeRO-$stage failed:"; tail -5 "$log.log"; }
  $python - "$log" "$model" "$stage" "$micro" "$plan" "$out/$model-z$stage.report" >> "$results" <<'PY'
import json, re, sys
log, model, stage, micro, plan, report = sys.argv[1:7]
try:
    steps = [json.loads(l) for l in open(log + ".jsonl")]
except FileNotFoundError:
    steps = []
text = open(log + ".log").read()
arena = [int(x) for x in re.findall(r"device memory: (\d+) bytes", text)]
in_use = [int(x) for x in re.findall(r"(\d+) bytes of the device in use", text)]
timed = steps[2:] or steps
tps = sum(s["tokens_per_s"] for s in timed) / len(timed) if timed else 0.0
predicted = re.search(r"arena \(total\)\s+(\d+)", open(report).read())
print(json.dumps({"system": f"zcc-z{stage}", "model": model, "tokens_per_s": tps,
                  "peak_gib": max(arena) / 2**30 if arena else None,
                  "device_gib": max(in_use) / 2**30 if in_use else None,
                  "predicted_gib": int(predicted.group(1)) / 2**30 if predicted else None,
                  "loss_first": steps[0]["loss"] if steps else None,
                  "loss_last": steps[-1]["loss"] if steps else None}))
PY
  peer=$([ "$stage" = 0 ] && echo ddp || echo fsdp2)
  [ -n "${SKIP_PEERS:-}" ] || [ "$stage" = 3off ] || [ "$stage" = 3inf ] && continue
  torchrun --nproc-per-node "$nproc" "$root/bench/peers.py" --system $peer --preset "$model" --batch "$micro" \
    2> "$log.$peer.err" | tail -1 >> "$results" || tail -5 "$log.$peer.err"
done
# SKIP_INFER leaves out the inference rows (when the cases are split over
# several device calls); they need two GPUs.
if [ "$nproc" -lt 2 ] && [ -z "${SKIP_INFER:-}" ] && [ -f "$out/gpt2-xl-infer.plan" ]; then
  # One GPU: the whole batch of 32 (5 runs, the last 4 timed, logits left
  # on the device) against torch's bf16 model on one GPU.
  $python -c "import numpy as np; np.save('$out/ids32.npy', np.random.default_rng(0).integers(0, 50304, (32, 1024)))"
  "$zrun" "$out/gpt2-xl-infer.plan" --backend cuda --weights random --input input_ids="$out/ids32.npy" \
    --repeat 5 --no-outputs --memory-report > "$out/infer-zcc.log" 2>&1 || tail -5 "$out/infer-zcc.log"
  $python - "$out/infer-zcc.log" >> "$results" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"batch of (\d+) samples in ([0-9.]+) ms", text)
arena = [int(x) for x in re.findall(r"device memory: (\d+) bytes", text)]
in_use = [int(x) for x in re.findall(r"(\d+) bytes of the device in use", text)]
if m:
    samples, ms = int(m.group(1)), float(m.group(2))
    print(json.dumps({"system": "zcc-infer", "model": "gpt2-xl", "latency_s": ms / 1e3,
                      "tokens_per_s": samples * 1024 / (ms / 1e3),
                      "peak_gib": max(arena) / 2**30 if arena else None}))
PY
  [ -n "${SKIP_PEERS:-}" ] || $python "$root/bench/peers.py" --system single-infer --preset gpt2-xl --batch 32 \
    >> "$results" 2> "$out/infer.err" || tail -5 "$out/infer.err"
fi
[ -n "${SKIP_PEERS:-}${SKIP_INFER:-}" ] || [ "$nproc" -lt 2 ] && { $python "$root/bench/table.py" "$results"; exit 0; }
# zcc's pipeline inference: 5 runs of the batch, the last 4 timed, logits
# left on the device (as torch pipelining leaves them).
$python -c "import numpy as np; np.save('$out/ids32.npy', np.random.default_rng(0).integers(0, 50304, (32, 1024)))"
for config in $pipeline_configs; do
  [ -f "$out/gpt2-xl-$config.plan" ] || continue
  "$zrun" "$out/gpt2-xl-$config.plan" --backend cuda --nproc 2 --weights random --input input_ids="$out/ids32.npy" \
    --repeat 5 --no-outputs --comm-timeout "${COMM_TIMEOUT:-60}" > "$out/$config-zcc.log" 2>&1 || tail -5 "$out/$config-zcc.log"
  $python - "$out/$config-zcc.log" "$out/gpt2-xl-$config.report" "$config" >> "$results" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
report = open(sys.argv[2]).read()
m = re.search(r"batch of (\d+) samples in ([0-9.]+) ms", text)
bubble = re.search(r"bubble fraction ([0-9.]+)", report)
schedule = re.search(r"(\w+) schedule", report)
if m:
    samples, ms = int(m.group(1)), float(m.group(2))
    print(json.dumps({"system": "zcc-pipeline:" + sys.argv[3], "model": "gpt2-xl", "latency_s": ms / 1e3,
                      "tokens_per_s": samples * 1024 / (ms / 1e3),
                      "schedule": schedule.group(1) if schedule else None,
                      "predicted_bubble": float(bubble.group(1)) if bubble else None}))
PY
done
torchrun --nproc-per-node 2 "$root/bench/peers.py" --system pipeline --preset gpt2-xl --batch 32 --chunks 8 \
  2> "$out/pipeline.err" | tail -1 >> "$results" || tail -5 "$out/pipeline.err"
$python "$root/bench/peers.py" --system single-infer --preset gpt2-xl --batch 32 >> "$results" 2> "$out/infer.err" || tail -5 "$out/infer.err"
$python "$root/bench/table.py" "$results"
