//===- ZPlanDialect.td - zplan dialect definition ----------*- tablegen -*-===//

#ifndef ZCC_DIALECT_PLAN_ZPLANDIALECT_TD
#define ZCC_DIALECT_PLAN_ZPLANDIALECT_TD

include "mlir/IR/OpBase.td"

def ZPlan_Dialect : Dialect {
  let name = "zplan";
  let summary = "The execution plan: buffers, programs, kernels and events";
  let description = [{
    zplan is what the runtime executes, nearly one to one. Memory is a few
    arenas, each allocated once, holding buffers at fixed offsets; a program
    is a straight list of instructions (kernels, copies, collectives, event
    records and waits), each on a numbered stream. Instructions name buffers
    and events by symbol, so there are no SSA values: the plan is data.
  }];
  let cppNamespace = "::zcc::zplan";
}

class ZPlan_Op<string mnemonic, list<Trait> traits = []>
    : Op<ZPlan_Dialect, mnemonic, traits>;

#endif // ZCC_DIALECT_PLAN_ZPLANDIALECT_TD
