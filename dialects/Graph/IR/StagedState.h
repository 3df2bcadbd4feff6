//===- StagedState.h - Ops whose result stands for a state ------*- C++ -*-===//
//
// In-place updates (accumulate, assign, the optimizers) write into a
// zgraph.param or zgraph.state. An op of another dialect whose result is a
// copy of a state staged for such updates (zdist.swap_in: NVMe-resident
// optimizer state read into host memory, written back after its updates)
// carries this trait, so that the updates may target its result. Header
// only: a dialect attaches it without linking zgraph.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_DIALECTS_GRAPH_IR_STAGEDSTATE_H
#define ZCC_DIALECTS_GRAPH_IR_STAGEDSTATE_H

#include "mlir/IR/OpDefinition.h"

namespace zcc::zgraph {

template <typename ConcreteType>
class StagedState : public mlir::OpTrait::TraitBase<ConcreteType, StagedState> {};

} // namespace zcc::zgraph

#endif // ZCC_DIALECTS_GRAPH_IR_STAGEDSTATE_H
