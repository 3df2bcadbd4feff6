#!/usr/bin/env bash
# On the GPU machine, after tools/gpu/dev-run.sh built build-gpu: the same
# plans with each setting of ZCC_MATMUL_ALGOS in SETTINGS (default:
# heuristic, cuBLASLt's first choice for every product; measured, 8 of its
# candidates timed on each shape, the default; measured:32 and
# measured:64), alternately, ROUNDS times: gpt2-xl inference of a batch of 32 and of 4
# (latency; the batch of 4 is a pipeline's micro-batch) and gpt2-xl ZeRO-0
# training at micro-batch 8 (tokens/s), from bench/gpu_bench.sh compile
# with NPROC=1 in build-bench (gpt2-xl-infer-mb4.plan: the same with a
# config of micro-batch 4; a plan that is missing is skipped). Logs under
# $OUT.
set -u
zrun=build-gpu/bin/zrun
out=${OUT:-/tmp}/algos
mkdir -p "$out"
python3 -c "import numpy as np; r = np.random.default_rng(0); np.save('$out/ids32.npy', r.integers(0, 50304, (32, 1024))); np.save('$out/ids4.npy', r.integers(0, 50304, (4, 1024)))"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for algos in ${SETTINGS:-heuristic measured measured:32 measured:64}; do
    for infer in gpt2-xl-infer:32:5 gpt2-xl-infer-mb4:4:9; do
      IFS=: read -r plan batch repeat <<< "$infer"
      [ -f "build-bench/$plan.plan" ] || continue
      ZCC_MATMUL_ALGOS=$algos timeout 120 $zrun "build-bench/$plan.plan" --backend cuda \
        --weights random --input input_ids="$out/ids$batch.npy" --repeat "$repeat" --no-outputs \
        > "$out/$plan-${algos/:/}-$round.log" 2>&1
      echo "$plan $algos round $round: $(grep -h '^inference' "$out/$plan-${algos/:/}-$round.log" || tail -2 "$out/$plan-${algos/:/}-$round.log")"
    done
    [ -f build-bench/gpt2-xl-z0.plan ] || continue
    ZCC_MATMUL_ALGOS=$algos timeout 150 $zrun build-bench/gpt2-xl-z0.plan --backend cuda \
      --weights random --steps 8 --log-json "$out/train-${algos/:/}-$round.jsonl" \
      > "$out/train-${algos/:/}-$round.log" 2>&1
    python3 - "$out/train-${algos/:/}-$round.jsonl" "$algos" "$round" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [r["tokens_per_s"] for r in rows[2:]]
print(f"train {sys.argv[2]} round {sys.argv[3]}: {sum(t) / max(1, len(t)):.0f} tokens/s (steps 3-{len(rows)}), loss {rows[-1]['loss']:.5f}")
PY
  done
done
