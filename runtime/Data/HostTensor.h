//===- HostTensor.h - A tensor in host memory -------------------*- C++ -*-===//
//
// What crosses the runtime's edge: an array read from a .npy file on its way
// into the arena, or an output copied out of it.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_DATA_HOSTTENSOR_H
#define ZCC_RUNTIME_DATA_HOSTTENSOR_H

#include "plan.pb.h"

#include <cstdint>
#include <vector>

namespace zcc {

struct HostTensor {
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  /// Little-endian elements, row-major.
  std::vector<uint8_t> data;

  /// A 0-d tensor has one element.
  int64_t numElements() const {
    int64_t count = 1;
    for (int64_t dim : shape)
      count *= dim;
    return count;
  }
};

} // namespace zcc

#endif // ZCC_RUNTIME_DATA_HOSTTENSOR_H
