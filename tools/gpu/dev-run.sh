#!/usr/bin/env bash
# One device call: build the runtime (compiler off), then what MODE asks:
#   profile  per-kernel profiles of PROFILE_PLANS (bench plans)
#   bench    bench/gpu_bench.sh run (CASES, SKIP_PEERS as there)
#   check    tools/gpu/check.sh on build-gpu-plans
#   attention bench/attention.py (zcc's attention kernels against torch's)
#   matmul   bench/matmul.py (zcc's products, by cuBLASLt candidates timed,
#            against torch's; MATMUL_ARGS: more of its options)
#   algos    tools/gpu/matmul-algos.sh (whole plans by ZCC_MATMUL_ALGOS)
#   gputests the gpu-labelled tests (GPU_TESTS: a ctest -R pattern)
#   ab       tools/gpu/plans-ab.sh: training plans (PLANS, LABEL=PATH
#            pairs) alternately, ROUNDS times
#   offload  OFFLOAD_PLAN (default gpt2-xl-z3off, from gpu_bench.sh compile
#            with NPROC=1) for OFFLOAD_STEPS on build-bench/tokens.bin
#            (train_torch.py --make-data --distribution markov): every
#            step's loss, tokens/s of the applied and skipped steps, memory
#            (ZRUN_ARGS: more zrun options, e.g. --nvme-path DIR)
# NPROC (default 2) is the GPUs the profile and bench runs use.
# MODES lists them in order (default "profile check"). Logs under $OUT.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=$OUT
cmake -G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DZCC_BUILD_COMPILER=OFF > $out/cmake.log 2>&1
ninja -C build-gpu ${BUILD_TARGETS:-zrun zcc_cuda zcc-cuda-kernels-test zcc-cuda-unittests zcc-cuda-graph-test zcc-bench-attention zcc-bench-matmul} > $out/build.log 2>&1 || { grep -B2 -A12 -m3 error $out/build.log; exit 1; }
for mode in ${MODES:-profile check}; do
  case $mode in
    profile)
      for plan in ${PROFILE_PLANS:-gpt2-xl-z0}; do
        timeout 150 build-gpu/bin/zrun build-bench/$plan.plan --backend cuda --nproc ${NPROC:-2} --weights random --steps 3 \
          --profile=${PROFILE_ROWS:-30} > $out/prof-$plan.txt 2>&1
        head -${PROFILE_LINES:-60} $out/prof-$plan.txt
      done ;;
    bench)
      cp -r build-bench $out/bench
      ZRUN=build-gpu/bin/zrun timeout ${BENCH_TIMEOUT:-420} bash bench/gpu_bench.sh run $out/bench > $out/bench.txt 2>&1
      tail -30 $out/bench.txt; grep -h "program '" $out/bench/*.log | sort | uniq -c ;;
    infer)
      mkdir -p $out/infer && cp build-bench/gpt2-xl-pipeline_infer*.* $out/infer/
      CASES=" " ZRUN=build-gpu/bin/zrun timeout ${INFER_TIMEOUT:-200} bash bench/gpu_bench.sh run $out/infer > $out/infer.txt 2>&1
      tail -8 $out/infer.txt; tail -n 3 $out/infer/*-zcc.log; cat $out/infer/results.jsonl ;;
    attention)
      timeout ${ATTENTION_TIMEOUT:-200} python3 bench/attention.py --build build-gpu > $out/attention.txt 2>&1
      tail -12 $out/attention.txt ;;
    matmul)
      timeout ${MATMUL_TIMEOUT:-300} python3 bench/matmul.py --build build-gpu ${MATMUL_ARGS:-} > $out/matmul.txt 2>&1
      tail -16 $out/matmul.txt ;;
    algos)
      timeout ${ALGOS_TIMEOUT:-400} bash tools/gpu/matmul-algos.sh > $out/algos.txt 2>&1
      cat $out/algos.txt ;;
    offload)
      plan=build-bench/${OFFLOAD_PLAN:-gpt2-xl-z3off}
      timeout ${OFFLOAD_TIMEOUT:-150} build-gpu/bin/zrun $plan.plan --backend cuda --weights random \
        --steps ${OFFLOAD_STEPS:-30} --data build-bench/tokens.bin --log-json $out/offload.jsonl \
        --memory-report ${ZRUN_ARGS:-} > $out/offload.log 2>&1
      tail -8 $out/offload.log; grep "device (total)" $plan.report
      python3 - $out/offload.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(" ".join(f"{r['step']}:{r['loss']:.5f}{'s' if r['skipped'] else ''}" for r in rows))
for kind, keep in (("applied", False), ("skipped", True)):
    t = [r["tokens_per_s"] for r in rows[2:] if r["skipped"] == keep]
    print(f"{kind} steps (from step 3): {len(t)}, tokens/s {sum(t) / max(1, len(t)):.0f}")
PY
      ;;
    ab)
      OUT=$out timeout ${AB_TOTAL_TIMEOUT:-400} bash tools/gpu/plans-ab.sh > $out/ab.txt 2>&1
      cat $out/ab.txt ;;
    gputests)
      ctest --test-dir build-gpu -L gpu -j4 --output-on-failure ${GPU_TESTS:+-R "$GPU_TESTS"} > $out/ctest-gpu.log 2>&1
      grep -E "tests passed|tests failed|\(Failed\)" $out/ctest-gpu.log ;;
    check)
      OUT=$out/check SKIP_BUILD=1 SKIP_TESTS=${SKIP_TESTS:-} SKIP_TORCH=${SKIP_TORCH-1} SKIP_ADAM=1 \
        SKIP_KILL=${SKIP_KILL-1} SKIP_EXPORT=1 SKIP_GRADCHECK=1 \
        timeout ${CHECK_TIMEOUT:-240} bash tools/gpu/check.sh build-gpu-plans > $out/check.txt 2>&1
      grep -E "gpu tests|rtol|infer|kill|failed|FAILED|error" $out/check.txt | head -60 ;;
  esac
done
