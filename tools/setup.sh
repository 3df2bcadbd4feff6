#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for zcc and builds it into build/.
#
#   bash tools/setup.sh            # install what is missing, configure, build
#
# Installs the Debian packages zcc needs when they are missing (apt-get, as
# root or through sudo), then configures with CMake + Ninja and builds with
# -j2. The CUDA backend is built when the CUDA toolkit is found
# (/usr/local/cuda); it is not installed here.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ZCC_BUILD_DIR:-$root/build}"
jobs="${ZCC_JOBS:-2}"

packages=(
  cmake ninja-build g++ lld python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  nlohmann-json3-dev libgtest-dev libgmock-dev
  libonnx-dev libprotobuf-dev protobuf-compiler zlib1g-dev libopenblas-dev
  python3-onnx python3-numpy python3-torch
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
      sudo="sudo"
    else
      echo "setup: error: these Debian packages are missing and this is not root:" >&2
      echo "  apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda_args=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi

cmake -G Ninja -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
  -DPython3_EXECUTABLE=/usr/bin/python3 \
  "${cuda_args[@]}" "$@"
cmake --build "$build" -- -j"$jobs"
