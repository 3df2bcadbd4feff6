//===- ZDistDialect.td - zdist dialect definition ----------*- tablegen -*-===//

#ifndef ZCC_DIALECT_DIST_ZDISTDIALECT_TD
#define ZCC_DIALECT_DIST_ZDISTDIALECT_TD

include "mlir/IR/OpBase.td"

def ZDist_Dialect : Dialect {
  let name = "zdist";
  let summary = "Device mesh, shardings and explicit collectives";
  let description = [{
    zdist describes how the training step is spread over devices. A module
    defines one device mesh (`zdist.mesh`); shardings
    (`#zdist.sharding<@mesh, ...>`) say which mesh axes split each dimension of
    a tensor; the ops that move data between devices (`all_gather`,
    `reduce_scatter`, `all_reduce`) and the ops that end a gathered value's life
    (`release`) are explicit, so memory and communication can be planned
    ahead of time. Pipeline stages are explicit too: a value crossing
    stages is a `transfer`, lowered to `send`/`recv` between the stages'
    programs (which hand values to each other through `store`), and each
    stage's schedule is a `pipeline` op. Every tensor has a static shape: the shape of each local
    shard follows from the global shape and the mesh.
  }];
  let cppNamespace = "::zcc::zdist";
  let useDefaultAttributePrinterParser = 1;
}

class ZDist_Op<string mnemonic, list<Trait> traits = []>
    : Op<ZDist_Dialect, mnemonic, traits>;

#endif // ZCC_DIALECT_DIST_ZDISTDIALECT_TD
