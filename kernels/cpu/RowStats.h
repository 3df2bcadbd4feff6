//===- RowStats.h - The row statistics of layer_norm ------------*- C++ -*-===//
//
// layer_norm and layer_norm_grad normalise a row with the same mean and
// inverse standard deviation, bit for bit: the gradient recomputes them
// (a kernel may not allocate to keep them), so both use this one function.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_KERNELS_CPU_ROWSTATS_H
#define ZCC_KERNELS_CPU_ROWSTATS_H

#include "kernels/cpu/Float16.h"

#include <cmath>
#include <cstdint>

namespace zcc::cpu::detail {

/// The statistics layer_norm normalises a row with.
struct RowStats {
  double mean = 0, inverseStd = 0;
};

/// Computed in double, the mean before the variance.
template <typename T>
RowStats rowStats(const T *row, int64_t columns, double epsilon) {
  double sum = 0;
  for (int64_t c = 0; c < columns; ++c)
    sum += load(row[c]);
  RowStats stats;
  stats.mean = sum / columns;
  double squares = 0;
  for (int64_t c = 0; c < columns; ++c) {
    double centered = load(row[c]) - stats.mean;
    squares += centered * centered;
  }
  stats.inverseStd = 1.0 / std::sqrt(squares / columns + epsilon);
  return stats;
}

} // namespace zcc::cpu::detail

#endif // ZCC_KERNELS_CPU_ROWSTATS_H
