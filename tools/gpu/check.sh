#!/usr/bin/env bash
# On a GPU machine (no MLIR needed): builds the runtime with the compiler
# switched off, runs the gpu-labelled tests, then checks the cuda backend
# against the cpu backend on the plans tools/gpu/make-plans.sh compiled:
#   tools/gpu/check.sh [PLANS_DIR]        (default build-gpu-plans)
# Logs go to $OUT (default gpu-check-out); the summary is the last lines.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
plans=${1:-$root/build-gpu-plans}
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python=${PYTHON:-python3}
inputs=$root/test/E2E/Inputs
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
steps=${STEPS:-20}

if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -G Ninja -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release \
    -DZCC_BUILD_COMPILER=OFF > "$out/cmake.log" 2>&1 || { note "cmake failed"; tail -30 "$out/cmake.log"; exit 1; }
  ninja -C "$root/build-gpu" ${NINJA_TARGETS:-} > "$out/build.log" 2>&1 || { note "build failed"; grep -B2 -A12 -m3 "error" "$out/build.log"; exit 1; }
  note "build: ok"
fi
zrun=$root/build-gpu/bin/zrun
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$summary"
gpus=$(nvidia-smi -L | wc -l)
# A plan of more ranks than GPUs runs with ranks sharing the GPUs
# (zrun --ranks-per-gpu: NCCL's socket transport between them), so that
# every multi-rank plan is checked on any machine; the summary says so.
share() {
  local world=$1
  if [ "$world" -gt "$gpus" ]; then echo "--ranks-per-gpu $(( (world + gpus - 1) / gpus ))"; fi
}

if [ -z "${SKIP_TESTS:-}" ]; then
  ctest --test-dir "$root/build-gpu" -L gpu -j4 --output-on-failure > "$out/ctest-gpu.log" 2>&1
  note "gpu tests: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log")"
  grep -E "^\s*[0-9]+ - .*\(Failed|Exception|Timeout\)|Failed  |\*\*\*" "$out/ctest-gpu.log" | head -40 | tee -a "$summary"
fi

# Training: every plan on both backends, the same data, the logs compared
# step by step (fp32 within 1e-4 relative, bf16 and fp16 within 2e-2):
# z<stage>r<ranks> the ZeRO plans, p<stages>r<ranks> the pipelines.
for plan in "$plans"/${PLANS_GLOB:-[zp]*r*-*}.plan; do
  name=$(basename "$plan" .plan)
  world=${name#*r}; world=${world%%-*}
  sharing=$(share "$world")
  tol=1e-4; [[ $name == *bf16 || $name == *fp16 ]] && tol=2e-2
  "$zrun" "$plan" --backend cpu --nproc "$world" --steps "$steps" --data "$plans/tokens.bin" \
    --log-json "$out/$name.cpu.jsonl" > "$out/$name.cpu.log" 2>&1 || { note "$name: cpu run failed"; tail -5 "$out/$name.cpu.log"; continue; }
  start=$(date +%s.%N)
  "$zrun" "$plan" --backend cuda --nproc "$world" $sharing --steps "$steps" --data "$plans/tokens.bin" \
    --log-json "$out/$name.cuda.jsonl" > "$out/$name.cuda.log" 2>&1 || { note "$name: cuda run failed"; tail -15 "$out/$name.cuda.log" | tee -a "$summary"; continue; }
  end=$(date +%s.%N)
  result=$($python "$inputs/compare_losses.py" "$out/$name.cuda.jsonl" "$out/$name.cpu.jsonl" \
    --rtol $tol --fields loss,lr,grad_norm 2>&1 | tail -8)
  note "$name (rtol $tol, $(awk "BEGIN { printf \"%.1f\", $end - $start }") s${sharing:+, $sharing}): $result"
done

# Parity with PyTorch on the GPU (fp32, 20 steps, within 1e-4 relative).
if [ -f "$plans/torch/plan.bin" ] && [ -z "${SKIP_TORCH:-}" ]; then
  $python "$root/examples/models/train_torch.py" --onnx "$plans/torch/model.onnx" \
    -c "$inputs/ds_train_fp32.json" --data "$plans/torch/tokens.bin" --steps "$steps" \
    --device cuda --log-json "$out/torch-gpu.jsonl" > "$out/torch-gpu.log" 2>&1 \
    || { note "torch on cuda failed"; tail -5 "$out/torch-gpu.log" | tee -a "$summary"; }
  "$zrun" "$plans/torch/plan.bin" --backend cuda --steps "$steps" --data "$plans/torch/tokens.bin" \
    --log-json "$out/torch-zcc.jsonl" > "$out/torch-zcc.log" 2>&1 \
    || { note "zcc on cuda (torch parity) failed"; tail -5 "$out/torch-zcc.log" | tee -a "$summary"; }
  note "zcc cuda vs torch cuda (fp32, rtol 1e-4): $($python "$inputs/compare_losses.py" \
    "$out/torch-zcc.jsonl" "$out/torch-gpu.jsonl" --rtol 1e-4 --fields loss,lr,grad_norm 2>&1 | tail -3)"
fi

# The host optimizer of CPU offload against torch's CPU AdamW, on this
# machine's cores.
if [ -x "$root/build-gpu/bin/zcc-bench-cpu-adam" ] && [ -z "${SKIP_ADAM:-}" ]; then
  $python "$root/bench/cpu_adam.py" --build "$root/build-gpu" --elements 100000000 --steps 5 \
    > "$out/cpu-adam.txt" 2>&1
  cat "$out/cpu-adam.txt" >> "$summary"
fi

# Inference: the cuda outputs against the cpu outputs (fp32 within 1e-4,
# bf16 within 2e-2).
for entry in "infer:input_ids.npy:1e-4:1" "infer-wide:input_ids_wide.npy:1e-4:1" \
             "infer-wide-bf16:input_ids_wide.npy:2e-2:1" "infer-wide-pp2:input_ids_pp2.npy:1e-4:2" \
             "infer-wide-dp2-z3:input_ids_pp2.npy:1e-4:2" "infer-wide-pp2dp2:input_ids_pp2dp2.npy:1e-4:4"; do
  IFS=: read -r name input rtol world <<< "$entry"
  [ -f "$plans/$name.plan" ] || continue
  for backend in cpu cuda; do
    sharing=""; [ $backend = cuda ] && sharing=$(share "$world")
    "$zrun" "$plans/$name.plan" --backend $backend --nproc "$world" $sharing --input input_ids="$plans/$input" \
      --output-dir "$out/$name-$backend" > "$out/$name-$backend.log" 2>&1 || { note "$name: $backend run failed"; tail -10 "$out/$name-$backend.log" | tee -a "$summary"; }
  done
  for file in "$out/$name-cpu"/*.npy; do
    note "$name${sharing:+ ($sharing)} $(basename "$file"): $($python "$inputs/compare_npy.py" "$out/$name-cuda/$(basename "$file")" "$file" --rtol "$rtol" 2>&1 | tail -3)"
  done
done

# float64 finite-difference gradient checks of every differentiable op, run
# on the cuda kernels.
if [ -f "$plans/gradcheck/models.txt" ] && [ -z "${SKIP_GRADCHECK:-}" ]; then
  # Eight at a time: each is a short process, mostly CUDA start-up.
  xargs -P 8 -I{} sh -c '"$1" "$2/gradcheck/{}.plan" --backend cuda --check-gradients \
      --check-elements 32 > "$3/gradcheck-{}.log" 2>&1 && echo "ok {}" || echo "FAILED {}"' \
    _ "$zrun" "$plans" "$out" < "$plans/gradcheck/models.txt" > "$out/gradcheck.txt"
  note "gradcheck on cuda: $(grep -c '^ok' "$out/gradcheck.txt") passed, $(grep -c '^FAILED' "$out/gradcheck.txt") failed"
  for model in $(grep '^FAILED' "$out/gradcheck.txt" | cut -d' ' -f2); do
    note "gradcheck $model: FAILED"; tail -4 "$out/gradcheck-$model.log" >> "$summary"
  done
fi

# The trained export read by the outside world: onnxruntime runs
# trained.onnx and gives zcc's outputs; torch's safetensors reader loads the
# weights with the values of trained.onnx's initializers.
if [ -d "$plans/export" ] && [ -z "${SKIP_EXPORT:-}" ]; then
  $python - "$plans/export" > "$out/export-check.log" 2>&1 <<'PY'
import sys, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
from safetensors.torch import load_file
d = sys.argv[1]
ids = np.load(f"{d}/ids.npy").astype(np.int64)
session = ort.InferenceSession(f"{d}/trained.onnx", providers=["CPUExecutionProvider"])
feeds = {i.name: ids for i in session.get_inputs()}
names = [o.name for o in session.get_outputs()]
worst = 0.0
for name, value in zip(names, session.run(None, feeds)):
    mine = np.load(f"{d}/zcc-out/{name.replace('/', '_')}.npy")
    err = float(np.max(np.abs(mine - value) / np.maximum(1.0, np.abs(value))))
    worst = max(worst, err)
    print(f"onnxruntime {name}: max relative error {err:.2e}")
model = onnx.load(f"{d}/trained.onnx")
initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
tensors = load_file(f"{d}/trained.safetensors")
same = sum(1 for k, v in tensors.items() if k in initializers and np.array_equal(v.numpy(), initializers[k]))
print(f"safetensors (torch): {len(tensors)} tensors, {same} equal to trained.onnx's initializers")
print("export check:", "ok" if worst < 1e-4 and same == len(tensors) else "FAILED")
PY
  note "$(tail -4 "$out/export-check.log")"
fi

# A rank killed mid-run: the other ranks must exit within 60 s, saying why.
if [ -f "$plans/z0r2-fp32.plan" ] && [ -z "${SKIP_KILL:-}" ]; then
  sharing=$(share 2)
  note "kill rank 1 of 2${sharing:+ ($sharing)}"
  NCCL_DEBUG=${NCCL_DEBUG:-WARN} \
  "$zrun" "$plans/z0r2-fp32.plan" --backend cuda --nproc 2 $sharing --steps 100000 --data "$plans/tokens.bin" \
    --comm-timeout 20 --log-json "$out/kill.jsonl" > "$out/kill.log" 2>&1 &
  launcher=$!
  # Mid-run: once a few steps are logged (at most a minute).
  for _ in $(seq 120); do
    [ "$(cat "$out/kill.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 0.5
  done
  victim=""
  for pid in $(pgrep -f "z0r2-fp32.plan"); do
    if tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -qx "ZCC_RANK=1"; then victim=$pid; fi
  done
  if [ -n "$victim" ]; then
    killed=$(date +%s)
    kill -9 "$victim"
    # Where rank 0 waits, if it still runs after its --comm-timeout.
    ( sleep 25
      for pid in $(pgrep -f "z0r2-fp32.plan"); do
        if tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -qx "ZCC_RANK=0"; then
          echo "rank 0 (pid $pid) still runs 25 s after the kill:"
          if command -v gdb > /dev/null; then
            timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^#|^Thread" | head -150
          else
            for task in /proc/$pid/task/*; do echo "$task $(cat $task/comm) $(cat $task/wchan)"; cat $task/stack 2>/dev/null | head -8; done
          fi
        fi
      done ) > "$out/kill-stacks.txt" 2>&1 &
    wait $launcher; status=$?
    took=$(( $(date +%s) - killed ))
    note "kill rank 1 after step $(wc -l < "$out/kill.jsonl"): the job exited with status $status $took s after the kill"
    tail -6 "$out/kill.log" | tee -a "$summary"
  else
    note "kill rank 1: rank 1 not found"; kill $launcher
  fi
fi
echo "---- summary"; cat "$summary"
