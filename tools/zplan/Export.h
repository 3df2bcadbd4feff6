//===- Export.h - Trained weights out of a checkpoint ------------*- C++ -*-===//
//
// `zplan export CHECKPOINT_DIR -o WEIGHTS.safetensors` consolidates the
// newest whole checkpoint's parameters (each rank's rows joined into the
// whole tensor) into one safetensors file named as the ONNX initializers are;
// `zplan export CHECKPOINT_DIR --onnx MODEL.onnx -o TRAINED.onnx` writes a copy
// of the model (and of its external-data files) whose initializers hold the
// trained values, byte for byte in place, so any ONNX runtime loads it.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_TOOLS_ZPLAN_EXPORT_H
#define ZCC_TOOLS_ZPLAN_EXPORT_H

#include "runtime/Support/Status.h"

#include <string>

namespace zcc {

/// Writes the checkpoint's parameters to `output` (safetensors).
Status exportSafetensors(const std::string &checkpointDir, const std::string &output);

/// Writes a copy of `model` with the checkpoint's parameters to `output`.
Status exportOnnx(const std::string &checkpointDir, const std::string &model,
                  const std::string &output);

} // namespace zcc

#endif // ZCC_TOOLS_ZPLAN_EXPORT_H
