#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the users' example configs.
#
# This version of zcc has its foundation only: it resolves DeepSpeed configs
# exactly as DeepSpeed does (and stricter), so the main job checks the two
# example configs and prints them fully resolved. Compiling a model to a plan
# and running it with zrun come with the ONNX importer and the runtime.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ZCC_BUILD_DIR:-$root/build}"
bash "$root/tools/setup.sh"
zcc="$build/bin/zcc"

echo "== ZeRO-3 with CPU offload, 1 rank: examples/ds_zero3_offload.json"
"$zcc" --emit config -c "$root/examples/ds_zero3_offload.json" --world-size 1

echo "== Pipeline, 2 stages on 2 ranks: examples/ds_pipeline.json"
"$zcc" --emit config -c "$root/examples/ds_pipeline.json" --world-size 2

echo "== The ZeRO-3 config on 2 ranks (its batch triple only holds on 1):"
if "$zcc" --emit config -c "$root/examples/ds_zero3_offload.json" --world-size 2 >/dev/null; then
  echo "unexpected: the inconsistent batch triple was accepted" >&2
  exit 1
fi
