#!/usr/bin/env bash
# On the GPU machine, after tools/gpu/dev-run.sh built build-gpu: training
# plans run alternately by the same zrun, ROUNDS times (default 2), so that
# two compilers' plans of one model compare within one call. PLANS lists
# LABEL=PATH pairs (e.g. "before=build-bench/gpt2-xl-z0-before.plan
# after=build-bench/gpt2-xl-z0.plan"); each run trains STEPS steps
# (default 8) on random weights and prints its mean tokens/s over steps 3
# on and its last loss. A pair may name its own zrun after a colon
# (LABEL=PATH:ZRUN), to compare two runtimes on one plan. Logs under $OUT.
set -u
out=${OUT:-/tmp}/plans-ab
mkdir -p "$out"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for entry in ${PLANS:?LABEL=PATH pairs}; do
    label=${entry%%=*}
    plan=${entry#*=}
    zrun=build-gpu/bin/zrun
    if [[ $plan == *:* ]]; then
      zrun=${plan#*:}
      plan=${plan%%:*}
    fi
    log=$out/$label-$round
    timeout "${AB_TIMEOUT:-150}" $zrun "$plan" --backend cuda --nproc "${NPROC:-1}" --weights random \
      --steps "${STEPS:-8}" --log-json "$log.jsonl" > "$log.log" 2>&1 ||
      { echo "$label round $round: failed"; tail -3 "$log.log"; continue; }
    python3 - "$log.jsonl" "$label" "$round" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [r["tokens_per_s"] for r in rows[2:]]
print(f"{sys.argv[2]} round {sys.argv[3]}: {sum(t) / max(1, len(t)):.0f} tokens/s "
      f"(steps 3-{len(rows)}), loss {rows[-1]['loss']:.5f}")
PY
  done
done
