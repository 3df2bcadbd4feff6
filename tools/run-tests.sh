#!/usr/bin/env bash
# Sets up, builds, and runs every test (GoogleTest units and the lit suite)
# through CTest. GPU tests report themselves skipped where no GPU is present.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ZCC_BUILD_DIR:-$root/build}"
bash "$root/tools/setup.sh"
ctest --test-dir "$build" --output-on-failure -j"${ZCC_JOBS:-2}"
