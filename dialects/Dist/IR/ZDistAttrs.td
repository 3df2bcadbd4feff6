//===- ZDistAttrs.td - zdist attributes --------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_DIST_ZDISTATTRS_TD
#define ZCC_DIALECT_DIST_ZDISTATTRS_TD

include "dialects/Dist/IR/ZDistDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// Integer-backed rather than a dialect attribute so that the ops print a bare
// keyword (`reduction = avg`) and the generic form still round-trips.
def ZDist_ReductionKind : I32EnumAttr<"ReductionKind",
    "How a collective combines the values of its group", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Avg", 1, "avg">,
  I32EnumAttrCase<"Max", 2, "max">,
  I32EnumAttrCase<"Min", 3, "min">
]> {
  let cppNamespace = "::zcc::zdist";
}

def ZDist_ShardingAttr : AttrDef<ZDist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor's dimensions are split over mesh axes";
  let description = [{
    Names a `zdist.mesh` and, for each dimension of a tensor, the mesh axes
    that dimension is split over (major to minor); `{}` leaves the dimension
    whole. A mesh axis splits at most one dimension, once. Axes of the mesh
    that split no dimension replicate the tensor.

    ```mlir
    // Rows split over the 4 "dp" devices, columns whole: a 8x4 tensor has
    // 2x4 local shards, each replicated over "pp".
    #zdist.sharding<@m, [{"dp"}, {} ]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::FlatSymbolRefAttr", "the zdist.mesh">:$mesh,
    ArrayRefParameter<"::mlir::ArrayAttr",
                      "the mesh axis names (StringAttr) of each dimension">
        :$split_axes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // ZCC_DIALECT_DIST_ZDISTATTRS_TD
