#!/usr/bin/env bash
# Sets up, builds, and runs the main job: compile an example model with a
# user's DeepSpeed config and run its plan on the default (cpu) backend.
#
#   bash tools/run-example.sh [WORKDIR]      (default /tmp/zcc-example)
#
# The model is a GPT-2-style decoder written by examples/models/make_models.py
# (4 layers, width 256, 8 heads, vocabulary 1024, sequence 128); the config
# is the ZeRO-3 guide's (examples/ds_zero3_offload.json), whose micro-batch
# (4) sets the batch. The job compiles and runs the inference plan (`--mode
# infer`), then a training plan of a small GPT-2 with its loss (2 layers,
# width 64): 60 optimizer steps of 8 micro-steps in fp16 with the config's
# dynamic loss scaler (its first steps overflow from 2^32 and are skipped,
# as DeepSpeed's are), AdamW and WarmupLR, on a seeded synthetic token source.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ZCC_BUILD_DIR:-$root/build}"
work="${1:-/tmp/zcc-example}"
bash "$root/tools/setup.sh"
mkdir -p "$work"

echo "== the configs, resolved"
"$build/bin/zcc" --emit config -c "$root/examples/ds_zero3_offload.json" --world-size 1 > "$work/ds_zero3_offload.resolved.json"
"$build/bin/zcc" --emit config -c "$root/examples/ds_pipeline.json" --world-size 2 > "$work/ds_pipeline.resolved.json"
echo "wrote $work/ds_zero3_offload.resolved.json and $work/ds_pipeline.resolved.json"

echo "== the model"
/usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --layers 4 --width 256 \
  --heads 8 --vocab 1024 --seq 128 --no-loss -o "$work/gpt2.onnx"

echo "== compile: zcc gpt2.onnx -c ds_zero3_offload.json --mode infer --report -o gpt2.plan"
"$build/bin/zcc" "$work/gpt2.onnx" -c "$root/examples/ds_zero3_offload.json" --mode infer \
  --report -o "$work/gpt2.plan"

echo "== run: zrun gpt2.plan --input input_ids=ids.npy"
/usr/bin/python3 -c "import numpy as np; np.save('$work/ids.npy', np.random.default_rng(0).integers(0, 1024, (4, 128)))"
"$build/bin/zrun" "$work/gpt2.plan" --input "input_ids=$work/ids.npy" --output-dir "$work/out" --memory-report
/usr/bin/python3 - "$work/out/logits.npy" <<'PY'
import sys
import numpy as np
logits = np.load(sys.argv[1])
print(f"logits {logits.shape} {logits.dtype}: mean {logits.mean():.5f}, std {logits.std():.5f}, "
      f"finite {bool(np.isfinite(logits).all())}")
PY

echo "== train: zcc gpt2-loss.onnx -c ds_zero3_offload.json --report -o train.plan; zrun train.plan --steps 60"
/usr/bin/python3 "$root/examples/models/make_models.py" --model gpt2 --preset tiny -o "$work/gpt2-loss.onnx"
"$build/bin/zcc" "$work/gpt2-loss.onnx" -c "$root/examples/ds_zero3_offload.json" --report \
  -o "$work/train.plan"
"$build/bin/zrun" "$work/train.plan" --steps 60 --log-json "$work/train.jsonl"
echo "wrote $work/train.jsonl (one JSON object per optimizer step)"
