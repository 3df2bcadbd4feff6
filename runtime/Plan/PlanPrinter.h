//===- PlanPrinter.h - A plan as readable text ------------------*- C++ -*-===//
//
// What `zplan dump` prints (and `zcc --emit plan-text` may reuse): every
// header field, buffer, weight, binding, training setting and instruction, one
// per line, in plan order, with attributes sorted by name, so the text is the
// same for the same plan and lit tests can FileCheck the serializer through
// it.
//
//===----------------------------------------------------------------------===//

#ifndef ZCC_RUNTIME_PLAN_PLANPRINTER_H
#define ZCC_RUNTIME_PLAN_PLANPRINTER_H

#include "plan.pb.h"

#include <string>

namespace zcc {

/// The plan as text. `header` supplies the file's magic, version, producer
/// and checksum; its `plan` bytes are not read. Ids out of range are printed
/// as they are, so an unvalidated plan prints too.
std::string printPlan(const plan::PlanFile &header, const plan::Plan &plan);

} // namespace zcc

#endif // ZCC_RUNTIME_PLAN_PLANPRINTER_H
