//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// zrun reads inputs from and writes outputs to .npy files, the format every
// Python user can produce and check with numpy.load / numpy.save. Supported:
// format versions 1.0 and 2.0, C order, little-endian f2, f4, f8, i8, i4 and
// one-byte i1 and b1. Anything else is an error that says what the file has
// and how to convert it.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_DATA_NPY_H
#define ZCC_RUNTIME_DATA_NPY_H

#include "runtime/Data/HostTensor.h"
#include "runtime/Support/Status.h"

#include <string>

namespace zcc {

/// Reads the .npy file at `path`.
StatusOr<HostTensor> readNpy(const std::string &path);

/// Parses the bytes of a .npy file; `name` (a path) names them in messages.
StatusOr<HostTensor> parseNpy(const std::string &bytes,
                              const std::string &name);

/// The bytes of a .npy file holding `tensor` (version 1.0 unless the header
/// needs 2.0's longer length field).
StatusOr<std::string> encodeNpy(const HostTensor &tensor);

/// Writes `tensor` to `path` as a .npy file.
Status writeNpy(const std::string &path, const HostTensor &tensor);

/// The numpy descr of `dtype` ("<f4"), or null where numpy has none (bf16).
const char *npyDescr(plan::DType dtype);

} // namespace zcc

#endif // ZCC_RUNTIME_DATA_NPY_H
