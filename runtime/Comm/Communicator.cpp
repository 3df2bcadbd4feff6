//===- Communicator.cpp - Collectives between the ranks of a job ----------===//

#include "runtime/Comm/Communicator.h"

namespace zcc {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::kSum:
    return "sum";
  case ReduceOp::kAverage:
    return "average";
  }
  return "unknown";
}

} // namespace zcc
