//===- Passes.td - zplan passes ----------------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_PLAN_PASSES_TD
#define ZCC_DIALECT_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyPlanPass : Pass<"zcc-plan-verify", "mlir::ModuleOp"> {
  let summary = "Closes the plan phase: checks the module is a plan the runtime can run";
  let description = [{
    Runs last, before the plan is serialised. It fails on:
    - any zgraph or zdist op left in the module (it names the op): the
      runtime executes only zplan, so every earlier op must have been
      lowered;
    - a `zplan.wait` without a `zplan.record` of the same event on another
      stream earlier in the same program: without one the wait either
      waits for nothing, and its stream races ahead, or only for work of its
      own stream, which orders nothing;
    - two kernels on different streams of one program that touch the same
      bytes of an arena (the same buffer, or two the memory plan gives the
      same bytes), one of them writing, with no chain of records and waits
      ordering them (it names both): a race.
    It assumes the ops verify, which already guarantees that every event and
    buffer an instruction names exists (in its program or in the module). It
    does not look across programs: each program is run on its own, so a
    record in one cannot satisfy a wait in another. It changes nothing.
  }];
  let dependentDialects = ["::zcc::zplan::ZPlanDialect"];
}

#endif // ZCC_DIALECT_PLAN_PASSES_TD
