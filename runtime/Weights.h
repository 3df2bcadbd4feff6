//===- Weights.h - Filling parameter buffers --------------------*- C++ -*-===//
//
// A plan says, for every parameter, which byte range of which file holds its
// initial value (the ONNX model itself or its external-data file), and how
// `--weights random` draws it. The runtime only reads bytes: it never parses
// ONNX with ONNX's classes. `--weights MODEL.onnx` and `--weights
// FILE.safetensors` instead look every parameter up by name in that file
// (trained weights, a copy of the model), checked against the plan's buffer.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_WEIGHTS_H
#define ZCC_RUNTIME_WEIGHTS_H

#include "runtime/Backend.h"
#include "runtime/Plan/PlanLoader.h"
#include "runtime/Support/SwapFile.h"

#include <cstdint>
#include <string>

namespace zcc {

enum class WeightSource {
  /// The files the plan names.
  kPlanFiles,
  /// Drawn from each weight's RandomInit with a seed.
  kRandom,
  /// Each weight by name among the initializers of the ONNX model `file`.
  kOnnxFile,
  /// Each weight by name among the tensors of the safetensors file `file`.
  kSafetensorsFile,
};

struct WeightOptions {
  WeightSource source = WeightSource::kPlanFiles;
  /// Replaces the folder of Plan.model_path as the base of relative weight
  /// files (zrun --weights DIR); empty keeps the model's folder.
  std::string dir;
  /// For kOnnxFile and kSafetensorsFile.
  std::string file;
  /// For kRandom.
  uint64_t seed = 0;
  /// Which part of a partitioned weight (Weight.shards > 1) this rank
  /// loads: its data-parallel coordinate.
  int shardIndex = 0;
};

/// Where `weight`'s file is: its absolute path as is, otherwise relative to
/// `options.dir` or else to the folder of the plan's model_path.
std::string weightFilePath(const plan::Plan &plan, const plan::Weight &weight,
                           const WeightOptions &options);

/// Fills every parameter buffer of `plan` in `arena` (device memory of
/// `backend`), for HOST buffers in `hostArena` (its allocateHost memory),
/// and for NVME buffers in `swapFile`.
Status loadWeights(const LoadedPlan &plan, const WeightOptions &options,
                   Backend &backend, uint8_t *arena, uint8_t *hostArena,
                   SwapFile *swapFile = nullptr);

/// Writes `count` elements of `dtype` drawn by `init` into `host`. The
/// values depend only on `seed`, `weightIndex` and the element's position,
/// so a run is repeatable and each weight independent of the others.
/// `--weights random` draws weight W from stream randomStreamOf(W's name):
/// plans that order their weights differently (other world sizes, ZeRO
/// stages) start from the same values.
Status drawRandomWeight(const plan::RandomInit &init, plan::DType dtype,
                        uint64_t seed, uint32_t weightIndex, uint64_t count,
                        void *host);

/// The random stream of the weight named `name`.
uint32_t randomStreamOf(const std::string &name);

} // namespace zcc

#endif // ZCC_RUNTIME_WEIGHTS_H
