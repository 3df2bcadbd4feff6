//===- DTypes.h - Sizes and names of the plan's element types ---*- C++ -*-===//
//
// Header-only, so that every library that reads plans (the kernels, the
// communicator, the training data) uses the same table without linking
// another one.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_SCHEMA_DTYPES_H
#define ZCC_SCHEMA_DTYPES_H

#include "plan.pb.h"

#include <cstddef>

namespace zcc::plan {

/// Bytes of one element of `dtype` (0 for DTYPE_UNSPECIFIED and unknown
/// values).
inline size_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case F32:
  case I32:
    return 4;
  case F16:
  case BF16:
    return 2;
  case F64:
  case I64:
    return 8;
  case I8:
  case BOOL:
    return 1;
  default:
    return 0;
  }
}

/// "f32", "bf16", ...: the names of the IR, for messages.
inline const char *dtypeName(DType dtype) {
  switch (dtype) {
  case F32:
    return "f32";
  case F16:
    return "f16";
  case BF16:
    return "bf16";
  case F64:
    return "f64";
  case I64:
    return "i64";
  case I32:
    return "i32";
  case I8:
    return "i8";
  case BOOL:
    return "bool";
  case DTYPE_UNSPECIFIED:
    return "unspecified";
  default:
    return "unknown";
  }
}

} // namespace zcc::plan

#endif // ZCC_SCHEMA_DTYPES_H
