//===- ZPlanAttrs.td - zplan attributes --------------------*- tablegen -*-===//

#ifndef ZCC_DIALECT_PLAN_ZPLANATTRS_TD
#define ZCC_DIALECT_PLAN_ZPLANATTRS_TD

include "mlir/IR/EnumAttr.td"

// Integer-backed so that an arena prints a bare keyword (`in host`) and the
// generic form still round-trips.
def ZPlan_MemorySpace : I32EnumAttr<"MemorySpace",
    "Where an arena's memory lives", [
  // Device (GPU) memory; host memory on the CPU backend.
  I32EnumAttrCase<"Device", 0, "device">,
  // Pinned (page-locked) host memory, for offloaded state and staging copies.
  I32EnumAttrCase<"Host", 1, "host">,
  // The rank's swap file under nvme_path (ZeRO-Infinity's NVMe tier): only
  // swap_in and swap_out touch its buffers.
  I32EnumAttrCase<"Nvme", 2, "nvme">
]> {
  let cppNamespace = "::zcc::zplan";
}

#endif // ZCC_DIALECT_PLAN_ZPLANATTRS_TD
