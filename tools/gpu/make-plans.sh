#!/usr/bin/env bash
# Compiles, on a machine with zcc (no GPU needed), the plans that
# tools/gpu/check.sh runs on the GPU machine, which has no MLIR:
#   tools/gpu/make-plans.sh [BUILD_DIR] [OUT_DIR]
# (defaults build and build-gpu-plans). Writes the models, configs, token
# data and plans of the cuda-vs-cpu checks and a list of the gradient-check
# models.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
out=${2:-$root/build-gpu-plans}
python=${PYTHON:-/usr/bin/python3}
zcc=$build/bin/zcc
rm -rf "$out" && mkdir -p "$out/gradcheck"
inputs=$root/test/E2E/Inputs

# The tiny GPT-2 of the ZeRO tests, its token data, and configs for ZeRO 0
# and 3 on 1 and 2 ranks (batch 8 in every case), each in fp32 and bf16.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 -o "$out/gpt2.onnx"
$python "$root/examples/models/train_torch.py" --make-data "$out/tokens.bin" --tokens 8192 \
  --vocab 128 --seed 7 --distribution markov
$python - "$inputs" "$out" <<'PY'
import json, sys
inputs, out = sys.argv[1], sys.argv[2]
base = {"z0": "ds_dp_gas4.json", "z3": "ds_zero3_gas2.json"}
for stage, name in base.items():
    config = json.load(open(f"{inputs}/{name}"))
    for world in (1, 2):
        config["gradient_accumulation_steps"] = 8 // (2 * world)
        for precision in ("fp32", "bf16"):
            c = json.loads(json.dumps(config))
            if precision == "bf16":
                c["bf16"] = {"enabled": True}
            json.dump(c, open(f"{out}/{stage}r{world}-{precision}.json", "w"), indent=1)
PY
for stage in z0 z3; do
  for world in 1 2; do
    for precision in fp32 bf16; do
      name=$stage"r"$world-$precision
      "$zcc" "$out/gpt2.onnx" -c "$out/$name.json" --world-size $world -o "$out/$name.plan"
    done
  done
done
# GPT-2's tanh GELU in bf16: its gradient is the DGELU epilogue of the
# product before it (and the forward's residuals are addends, as above).
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --gelu tanh -o "$out/gpt2-tanh.onnx"
for world in 1 2; do
  "$zcc" "$out/gpt2-tanh.onnx" -c "$out/z0r$world-bf16.json" --world-size $world \
    -o "$out/z0r$world-tanh-bf16.plan"
done
# Dropout in training mode: the cuda kernel must drop what the cpu's drops,
# through recomputation-free ZeRO 0 and ZeRO 3, in fp32 and bf16.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --dropout 0.1 -o "$out/gpt2-dropout.onnx"
for name in z0r1-fp32 z0r1-bf16 z3r2-fp32 z3r2-bf16; do
  world=${name:3:1}
  "$zcc" "$out/gpt2-dropout.onnx" -c "$out/${name%-*}-${name#*-}.json" --world-size $world \
    -o "$out/${name%-*}-dropout-${name#*-}.plan"
done
# gradient_allreduce_op "sum": NCCL's sum of the gradients, in ZeRO-0's
# all-reduce and ZeRO-2's reduce-scatter, on 2 ranks.
for name in z0r2 z2r2; do
  source=$out/z0r2-fp32.json
  [ $name = z2r2 ] && source=$inputs/ds_zero2_gas2.json
  $python "$inputs/set_config.py" "$source" "$out/$name-sum.json" 'gradient_allreduce_op="sum"'
  "$zcc" "$out/gpt2.onnx" -c "$out/$name-sum.json" --world-size 2 -o "$out/$name-sum-fp32.plan"
done
# Lion: the cuda step against the cpu's, on the device (ZeRO 0 and 3) and
# on the host (ZeRO 2 with the optimizer offloaded).
for name in z0r1-fp32 z3r2-bf16 z2r1-off-fp32; do
  world=${name:3:1}
  case $name in
    z2r1-off-*) $python "$inputs/use_optimizer.py" "$inputs/ds_zero2_gas2.json" "$out/$name-lion.json" --offload
                $python - "$out/$name-lion.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["gradient_accumulation_steps"] = 4
json.dump(c, open(sys.argv[1], "w"))
PY
                ;;
    *) $python "$inputs/use_optimizer.py" "$out/${name%-*}-${name#*-}.json" "$out/$name-lion.json" ;;
  esac
  "$zcc" "$out/gpt2.onnx" -c "$out/$name-lion.json" --world-size $world \
    -o "$out/${name%-*}-lion-${name##*-}.plan"
done
# Adagrad, likewise: on the device and, offloaded, on the host.
$python "$inputs/use_optimizer.py" "$out/z0r1-fp32.json" "$out/z0r1-adagrad.json" --type adagrad \
  --lr 1e-2 --lr-decay 0.01
"$zcc" "$out/gpt2.onnx" -c "$out/z0r1-adagrad.json" -o "$out/z0r1-adagrad-fp32.plan"
$python "$inputs/use_optimizer.py" "$out/z2r1-off-fp32-lion.json" "$out/z2r1-off-adagrad.json" \
  --type adagrad --lr 1e-2
"$zcc" "$out/gpt2.onnx" -c "$out/z2r1-off-adagrad.json" -o "$out/z2r1-off-adagrad-fp32.plan"
# Lamb in fp32 and bf16 on one rank, data-parallel on two, and ZeRO-3 on two
# (each rank's sums of squares all-reduced through NCCL); Adam without bias
# correction.
for name in z0r1-fp32 z0r1-bf16 z0r2-fp32 z3r2-fp32 z3r2-bf16; do
  world=${name:3:1}
  $python "$inputs/use_optimizer.py" "$out/$name.json" "$out/$name-lamb.json" --type lamb --lr 2e-3 \
    --weight-decay 0.01
  "$zcc" "$out/gpt2.onnx" -c "$out/$name-lamb.json" --world-size $world \
    -o "$out/${name%-*}-lamb-${name##*-}.plan"
done
$python "$inputs/set_config.py" "$out/z0r1-fp32.json" "$out/z0r1-uncorrected.json" \
  optimizer.params.bias_correction=false
"$zcc" "$out/gpt2.onnx" -c "$out/z0r1-uncorrected.json" -o "$out/z0r1-uncorrected-fp32.plan"
# CPU offload (pinned host arena, host optimizer, offload/fetch copies on
# the communication stream): stage 2 with offload_optimizer on 1 and 2
# GPUs, stage 3 with offload_param too on 1 and 2 GPUs, in fp32 and bf16,
# and stage 3 with both offloads in fp16 with the ZeRO-3 guide's dynamic
# loss scaler (hysteresis 2; a power of 12 to start, so that the first
# steps' overflows, which both backends must find alike, are few); the
# -offs cases are the same with one micro-step per optimizer step, whose
# gradients stream to host memory during the backward.
$python - "$inputs" "$out" <<'PY'
import json, sys
inputs, out = sys.argv[1], sys.argv[2]
cases = {"z2r1-off": ("ds_zero2_gas2.json", 1, False), "z2r2-off": ("ds_zero2_gas2.json", 2, False),
         "z3r1-offp": ("ds_zero3_gas2.json", 1, True), "z3r2-offp": ("ds_zero3_gas2.json", 2, True),
         "z2r1-offs": ("ds_zero2_gas2.json", 1, False), "z2r2-offs": ("ds_zero2_gas2.json", 2, False),
         "z3r1-offs": ("ds_zero3_gas2.json", 1, True), "z3r2-offs": ("ds_zero3_gas2.json", 2, True),
         "z2r2-nvme": ("ds_zero2_gas2.json", 2, False), "z3r2-nvme": ("ds_zero3_gas2.json", 2, True)}
for name, (base, world, params) in cases.items():
    config = json.load(open(f"{inputs}/{base}"))
    config["gradient_accumulation_steps"] = 8 // (2 * world)
    if name.endswith("offs"):
        # One micro-step per optimizer step: the gradients stream to the
        # host during the backward.
        config["gradient_accumulation_steps"] = 1
        config["train_batch_size"] = 2 * world
    config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    if name.endswith("nvme"):
        # The optimizer state in a swap file under /tmp, swapped around
        # each update.
        config["zero_optimization"]["offload_optimizer"] = {"device": "nvme", "nvme_path": "/tmp"}
    if params:
        config["zero_optimization"]["offload_param"] = {"device": "cpu"}
    for precision in ("fp32", "bf16", "fp16"):
        c = json.loads(json.dumps(config))
        if precision == "bf16":
            c["bf16"] = {"enabled": True}
        if precision == "fp16":
            c["fp16"] = {"enabled": True, "loss_scale": 0, "loss_scale_window": 1000,
                         "initial_scale_power": 12, "hysteresis": 2, "min_loss_scale": 1}
        json.dump(c, open(f"{out}/{name}-{precision}.json", "w"), indent=1)
PY
for name in z2r1-off z2r2-off z3r1-offp z3r2-offp z2r1-offs z2r2-offs z3r1-offs z3r2-offs \
  z2r2-nvme z3r2-nvme; do
  world=${name#*r}; world=${world%%-*}
  precisions="fp32 bf16"; [[ $name == z3* ]] && precisions="fp32 bf16 fp16"
  for precision in $precisions; do
    "$zcc" "$out/gpt2.onnx" -c "$out/$name-$precision.json" --world-size $world \
      -o "$out/$name-$precision.plan"
  done
done
# The parameters on NVMe (offload_param "nvme", max_in_cpu 0): a one-block
# GPT-2 of width 384, whose MLP weights reach DeepSpeed's smallest swap (1
# MiB), on 1 rank in fp32 and bf16 (each swap_in a host call on the fetch
# stream, the micro-step a CUDA graph) and on 2 ranks in fp32 (the swap_ins
# feed ZeRO-3's gather buckets on the host).
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --layers 1 --width 384 \
  --heads 6 --vocab 128 -o "$out/gpt2-384.onnx"
$python - "$inputs" "$out" <<'PY'
import json, sys
inputs, out = sys.argv[1], sys.argv[2]
for world in (1, 2):
    for precision in ("fp32", "bf16"):
        config = json.load(open(f"{inputs}/ds_zero3_gas2.json"))
        config["gradient_accumulation_steps"] = 8 // (2 * world)
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
        config["zero_optimization"]["offload_param"] = {"device": "nvme", "nvme_path": "/tmp",
                                                        "max_in_cpu": 0}
        if precision == "bf16":
            config["bf16"] = {"enabled": True}
        json.dump(config, open(f"{out}/z3r{world}-nvp-{precision}.json", "w"), indent=1)
PY
for name in z3r1-nvp-fp32 z3r1-nvp-bf16 z3r2-nvp-fp32; do
  world=${name#*r}; world=${world%%-*}
  "$zcc" "$out/gpt2-384.onnx" -c "$out/$name.json" --world-size $world -o "$out/$name.plan"
done
# Pipeline training (the 4-block GPT-2 with its embedding tied to the
# output layer, so that the stages also send the tied weight): 2 stages
# 1F1B in fp32 and bf16, 4 stages GPipe, and 2 stages x 2 data-parallel
# ranks with ZeRO 3 inside each stage, and CPU offload with pipelines (ZeRO
# 3 with both offloads on 2 x 2, every parameter over 100 elements
# partitioned; ZeRO 1 with the host optimizer in bf16 on 2 x 1), and the
# zero-bubble schedule (zb-h1: weight passes of their own) on 2 stages in
# fp32 and bf16, on 4 stages, and on 2 stages x 2 data-parallel ranks with
# ZeRO 3; the interleaved schedule (2 chunks a stage) on 2 stages in fp32
# and bf16 and on 2 x 2 ranks with ZeRO 3; batch 8 in every case.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --layers 4 -o "$out/gpt2-4.onnx"
$python - "$inputs" "$out" <<'PY'
import json, sys
inputs, out = sys.argv[1], sys.argv[2]
cases = {"p2r2-1f1b-fp32": "ds_pp2_1f1b.json", "p2r2-1f1b-bf16": "ds_pp2_1f1b.json",
         "p4r4-gpipe-fp32": "ds_pp4_gpipe.json", "p2r4-zero3-fp32": "ds_pp2_zero3.json",
         "p2r4-z3off-fp32": "ds_pp2_zero3.json", "p2r2-z1off-bf16": "ds_pp2_1f1b.json",
         "p2r2-zbh1-fp32": "ds_pp2_1f1b.json", "p2r2-zbh1-bf16": "ds_pp2_1f1b.json",
         "p4r4-zbh1-fp32": "ds_pp4_gpipe.json", "p2r4-zbh1z3-fp32": "ds_pp2_zero3.json",
         "p2r2-il-fp32": "ds_pp2_1f1b.json", "p2r2-il-bf16": "ds_pp2_1f1b.json",
         "p2r4-ilz3-fp32": "ds_pp2_zero3.json"}
for name, base in cases.items():
    config = json.load(open(f"{inputs}/{base}"))
    if name.endswith("bf16"):
        config["bf16"] = {"enabled": True}
    if "z3off" in name:
        config["zero_optimization"].update(stage3_param_persistence_threshold=100,
                                           offload_param={"device": "cpu"},
                                           offload_optimizer={"device": "cpu"})
    if "z1off" in name:
        config["zero_optimization"] = {"stage": 1, "offload_optimizer": {"device": "cpu"}}
    if "zbh1" in name:
        config["pipeline"]["schedule"] = "zb-h1"
    if "-il" in name:
        config["pipeline"]["schedule"] = "interleaved"
    json.dump(config, open(f"{out}/{name}.json", "w"), indent=1)
PY
for name in p2r2-1f1b-fp32 p2r2-1f1b-bf16 p4r4-gpipe-fp32 p2r4-zero3-fp32 p2r4-z3off-fp32 \
  p2r2-z1off-bf16 p2r2-zbh1-fp32 p2r2-zbh1-bf16 p4r4-zbh1-fp32 p2r4-zbh1z3-fp32 \
  p2r2-il-fp32 p2r2-il-bf16 p2r4-ilz3-fp32; do
  world=${name#*r}; world=${world%%-*}
  "$zcc" "$out/gpt2-4.onnx" -c "$out/$name.json" --world-size $world -o "$out/$name.plan"
done
# Parity with PyTorch on the GPU: torch's own export of the GPT-2 (with its
# loss), trained by zrun on the cuda backend and by train_torch.py on cuda
# from the same initializers and tokens.
mkdir -p "$out/torch"
$python "$root/examples/models/export_torch.py" --model gpt2 --opset 17 --batch 2 -o "$out/torch/model.onnx"
$python "$root/examples/models/train_torch.py" --make-data "$out/torch/tokens.bin" --tokens 8192 \
  --vocab 128 --seed 0 --distribution markov
"$zcc" "$out/torch/model.onnx" -c "$inputs/ds_train_fp32.json" -o "$out/torch/plan.bin"
# Inference: the model without its loss, a larger one (width 256, 4
# layers, sequence 256: several tiles of every kernel) and their inputs.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --no-loss -o "$out/gpt2-infer.onnx"
"$zcc" "$out/gpt2-infer.onnx" -c "$inputs/ds_dp_gas4.json" --mode infer -o "$out/infer.plan"
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --no-loss --layers 4 \
  --width 256 --heads 4 --vocab 1000 --seq 256 -o "$out/gpt2-wide.onnx"
"$zcc" "$out/gpt2-wide.onnx" -c "$inputs/ds_dp_gas4.json" --mode infer -o "$out/infer-wide.plan"
# The same in bf16 with GPT-2's tanh GELU: its products' epilogues (GELU,
# bias, residual addend) in cuBLASLt against the cpu's.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 2 --no-loss --layers 4 \
  --width 256 --heads 4 --vocab 1000 --seq 256 --gelu tanh -o "$out/gpt2-wide-tanh.onnx"
"$zcc" "$out/gpt2-wide-tanh.onnx" -c "$inputs/ds_dp_gas4.json" --mode infer --infer-precision bf16 \
  -o "$out/infer-wide-bf16.plan"
# The wider model over 2 pipeline stages (GPipe, 4 micro-batches of 2: a
# batch of 8), whose activations go between the ranks by NCCL send/recv.
"$zcc" "$out/gpt2-wide.onnx" -c "$inputs/ds_infer_pp2_gpipe.json" --mode infer --world-size 2 \
  -o "$out/infer-wide-pp2.plan"
# The same pipeline with 2 data-parallel ranks per stage (a batch of 16):
# each stage's ranks gather the logits.
"$zcc" "$out/gpt2-wide.onnx" -c "$inputs/ds_infer_pp2_gpipe.json" --mode infer --world-size 4 \
  -o "$out/infer-wide-pp2dp2.plan"
# Data-parallel inference of a batch of 8 on 2 ranks of 4 rows, stage 3 with
# offload_param: parameters gathered from pinned host shards, outputs
# all-gathered by NCCL.
$python "$root/examples/models/make_models.py" --model gpt2 --batch 4 --no-loss --layers 4 \
  --width 256 --heads 4 --vocab 1000 --seq 256 -o "$out/gpt2-wide4.onnx"
"$zcc" "$out/gpt2-wide4.onnx" -c "$inputs/ds_infer_dp_zero3.json" --world-size 2 \
  -o "$out/infer-wide-dp2-z3.plan"
$python - "$out" <<'PY'
import numpy as np, sys
out = sys.argv[1]
rng = np.random.default_rng(3)
np.save(f"{out}/input_ids.npy", rng.integers(0, 128, size=(2, 32)).astype(np.int64))
np.save(f"{out}/input_ids_wide.npy", rng.integers(0, 1000, size=(2, 256)).astype(np.int64))
np.save(f"{out}/input_ids_pp2.npy", rng.integers(0, 1000, size=(8, 256)).astype(np.int64))
np.save(f"{out}/input_ids_pp2dp2.npy", rng.integers(0, 1000, size=(16, 256)).astype(np.int64))
PY

# A trained export (issue: checkpoints): 5 steps of ZeRO-3 on 2 cpu ranks,
# exported as safetensors and as an ONNX model with trained initializers;
# zcc's inference plan of trained.onnx gives the outputs onnxruntime must
# reproduce on the GPU machine.
mkdir -p "$out/export"
"$zcc" "$out/gpt2.onnx" -c "$inputs/ds_reshard_zero3.json" --world-size 2 -o "$out/export/z3.plan" 2>/dev/null
"$build/bin/zrun" "$out/export/z3.plan" --nproc 2 --steps 5 --data "$out/tokens.bin" --save "$out/export/ckpt" > /dev/null
"$build/bin/zplan" export "$out/export/ckpt" -o "$out/export/trained.safetensors"
"$build/bin/zplan" export "$out/export/ckpt" --onnx "$out/gpt2.onnx" -o "$out/export/trained.onnx"
rm -rf "$out/export/ckpt" "$out/export/z3.plan"
$python -c "import numpy as np; ids = (np.arange(64).reshape(2, 32) * 7) % 128; np.save('$out/export/ids.npy', ids)"
"$zcc" "$out/export/trained.onnx" -c "$inputs/ds_reshard_zero3.json" --mode infer -o "$out/export/trained.plan" 2>/dev/null
"$build/bin/zrun" "$out/export/trained.plan" --input input_ids="$out/export/ids.npy" \
  --input labels="$out/export/ids.npy" --output-dir "$out/export/zcc-out" > /dev/null

# float64 gradient checks of every differentiable op, on the cuda kernels.
for model in $($python "$inputs/gradcheck_models.py" --list); do
  $python "$inputs/gradcheck_models.py" "$model" -o "$out/gradcheck/$model.onnx"
  "$zcc" "$out/gradcheck/$model.onnx" -c "$inputs/ds_gradcheck.json" -o "$out/gradcheck/$model.plan"
  echo "$model" >> "$out/gradcheck/models.txt"
done
echo "plans in $out"
