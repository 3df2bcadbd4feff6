#!/usr/bin/env bash
# One device call: build the runtime (compiler off), profile one bench plan,
# then the gpu tests and the cuda-vs-cpu checks. Logs under $OUT.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=$OUT
cmake -G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DZCC_BUILD_COMPILER=OFF > $out/cmake.log 2>&1
ninja -C build-gpu zrun zcc_cuda zcc-cuda-kernels-test zcc-cuda-unittests > $out/build.log 2>&1 || { grep -B2 -A12 -m3 error $out/build.log; exit 1; }
for plan in ${PROFILE_PLANS:-gpt2-xl-z0}; do
  timeout 120 build-gpu/bin/zrun build-bench/$plan.plan --backend cuda --nproc 2 --weights random --steps 3 \
    --profile=${PROFILE_ROWS:-40} > $out/prof-$plan.txt 2>&1
  head -${PROFILE_LINES:-100} $out/prof-$plan.txt
done
OUT=$out/check SKIP_BUILD=1 SKIP_TORCH=1 SKIP_ADAM=1 SKIP_KILL=1 SKIP_EXPORT=1 \
  timeout ${CHECK_TIMEOUT:-300} bash tools/gpu/check.sh build-gpu-plans > $out/check.txt 2>&1
tail -40 $out/check.txt
