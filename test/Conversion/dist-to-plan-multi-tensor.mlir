// RUN: zcc-opt %s --split-input-file --zcc-graph-to-dist --zcc-dist-to-plan --zcc-plan-verify | FileCheck %s

// The optimizer step's adamws and fills become multi-tensor instructions:
// each adamw is hoisted to the group's first one over the fills between
// them, which then form one fill. An adamw reads a gradient that a fill
// before it clears (%gb is cleared before b's update reads it), so that
// adamw stays behind the fill: it starts a group of its own. An adamw of
// other attributes (adam, not adamw) or over another scalars buffer does
// not join, and an instruction that is neither (a cast) ends the groups.
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[A:b[0-9]+]], @device::@[[GA:b[0-9]+]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[C:b[0-9]+]], @device::@[[GC:b[0-9]+]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[S:b[0-9]+]]) outs(@device::@[[A]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[C]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "fill" ins() outs(@device::@[[GA]], @device::@[[GB:b[0-9]+]], @device::@[[GC]]) stream 0
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[B:b[0-9]+]], @device::@[[GB]], {{.*}}, @device::@[[S]]) outs(@device::@[[B]], {{.*}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[D:b[0-9]+]], {{.*}}, @device::@[[S]]) outs(@device::@[[D]], {{.*}}) stream 0 params {adam_w_mode = false, bias_correction = true}
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[E:b[0-9]+]], {{.*}}, @device::@[[S2:b[0-9]+]]) outs(@device::@[[E]], {{.*}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "cast"
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[F:b[0-9]+]], {{.*}}, @device::@[[S]]) outs(@device::@[[F]], {{.*}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: }
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"},
                            %other: tensor<8xf64> {zgraph.name = "other_scalars"}) -> (tensor<4xf16> {zgraph.name = "copy"}) {
    %a = zgraph.param "a" trainable : tensor<4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<4xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<4xf32>
    %b = zgraph.param "b" trainable : tensor<4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<4xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<4xf32>
    %c = zgraph.param "c" trainable : tensor<4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4xf32>
    %mc = zgraph.state "c" kind = "exp_avg" : tensor<4xf32>
    %vc = zgraph.state "c" kind = "exp_avg_sq" : tensor<4xf32>
    %d = zgraph.param "d" trainable : tensor<4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4xf32>
    %md = zgraph.state "d" kind = "exp_avg" : tensor<4xf32>
    %vd = zgraph.state "d" kind = "exp_avg_sq" : tensor<4xf32>
    %e = zgraph.param "e" trainable : tensor<4xf32>
    %ge = zgraph.state "e" kind = "grad" : tensor<4xf32>
    %me = zgraph.state "e" kind = "exp_avg" : tensor<4xf32>
    %ve = zgraph.state "e" kind = "exp_avg_sq" : tensor<4xf32>
    %f = zgraph.param "f" trainable : tensor<4xf32>
    %gf = zgraph.state "f" kind = "grad" : tensor<4xf32>
    %mf = zgraph.state "f" kind = "exp_avg" : tensor<4xf32>
    %vf = zgraph.state "f" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %a, %ga, %ma, %va, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    zgraph.fill %ga value = 0.0 : tensor<4xf32>
    zgraph.fill %gb value = 0.0 : tensor<4xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    zgraph.adamw %c, %gc, %mc, %vc, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    zgraph.fill %gc value = 0.0 : tensor<4xf32>
    zgraph.adamw %d, %gd, %md, %vd, %scalars {adam_w_mode = false} : tensor<4xf32>, tensor<8xf64>
    zgraph.adamw %e, %ge, %me, %ve, %other {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    %copy = zgraph.cast %a : tensor<4xf32> -> tensor<4xf16>
    zgraph.adamw %f, %gf, %mf, %vf, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    return %copy : tensor<4xf16>
  }
}

// -----

// A member writes nothing an earlier member reads (the device runs the
// members at once): "b"'s update writes the moment "a"'s reads as its
// gradient, so "b" stays out of "a"'s group, and "c" joins it over "b".
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[A:b[0-9]+]], @device::@[[MB:b[0-9]+]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[C:b[0-9]+]], {{[^)]*}}) outs(@device::@[[A]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[C]], {{[^)]*}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[B:b[0-9]+]], @device::@{{b[0-9]+}}, @device::@[[MB]], {{[^)]*}}) outs(@device::@[[B]], @device::@[[MB]], @device::@{{b[0-9]+}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: }
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<4xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<4xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<4xf32>
    %b = zgraph.param "b" trainable : tensor<4xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<4xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<4xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<4xf32>
    %c = zgraph.param "c" trainable : tensor<4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4xf32>
    %mc = zgraph.state "c" kind = "exp_avg" : tensor<4xf32>
    %vc = zgraph.state "c" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %a, %mb, %ma, %va, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    zgraph.adamw %c, %gc, %mc, %vc, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    return
  }
}

// -----

// The refresh of a parameter's device 16-bit copy (zcc-dist-compute-copies)
// fuses into the adamw before it as a fourth result, and the adamws that
// write bf16 copies group with one another: the fused instruction's
// results are each member's (param, exp_avg, exp_avg_sq, copy). "c"'s
// copy is f16, so it stays out of their group, and "d" has none.
// CHECK-DAG: zplan.buffer @[[CA:b[0-9]+]] {{.*}}kind = "parameter_copy", name = "a.copy", type = tensor<4xbf16>
// CHECK-DAG: zplan.buffer @[[CB:b[0-9]+]] {{.*}}kind = "parameter_copy", name = "b.copy", type = tensor<6xbf16>
// CHECK-DAG: zplan.buffer @[[CC:b[0-9]+]] {{.*}}kind = "parameter_copy", name = "c.copy", type = tensor<4xf16>
// CHECK-LABEL: zplan.program @optimizer_step {
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[A:b[0-9]+]], {{[^)]*}}, @device::@[[B:b[0-9]+]], {{[^)]*}}) outs(@device::@[[A]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[CA]], @device::@[[B]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[CB]]) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[C:b[0-9]+]], {{[^)]*}}) outs(@device::@[[C]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}, @device::@[[CC]]) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: zplan.kernel "adamw" ins(@device::@[[D:b[0-9]+]], {{[^)]*}}) outs(@device::@[[D]], @device::@{{b[0-9]+}}, @device::@{{b[0-9]+}}) stream 0 params {adam_w_mode = true, bias_correction = true}
// CHECK-NEXT: }
module attributes {zcc.config = {optimizer = {type = "AdamW"}}} {
  func.func @optimizer_step(%scalars: tensor<8xf64> {zgraph.name = "zcc.optimizer_scalars"}) {
    %a = zgraph.param "a" trainable : tensor<4xf32>
    %ga = zgraph.state "a" kind = "grad" : tensor<4xf32>
    %ma = zgraph.state "a" kind = "exp_avg" : tensor<4xf32>
    %va = zgraph.state "a" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %a, %ga, %ma, %va, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    %ca = zgraph.state "a" kind = "copy" : tensor<4xbf16>
    %ha = zgraph.cast %a : tensor<4xf32> -> tensor<4xbf16>
    zgraph.assign %ha into %ca : tensor<4xbf16> into tensor<4xbf16>
    %b = zgraph.param "b" trainable : tensor<6xf32>
    %gb = zgraph.state "b" kind = "grad" : tensor<6xf32>
    %mb = zgraph.state "b" kind = "exp_avg" : tensor<6xf32>
    %vb = zgraph.state "b" kind = "exp_avg_sq" : tensor<6xf32>
    zgraph.adamw %b, %gb, %mb, %vb, %scalars {adam_w_mode = true} : tensor<6xf32>, tensor<8xf64>
    %cb = zgraph.state "b" kind = "copy" : tensor<6xbf16>
    %hb = zgraph.cast %b : tensor<6xf32> -> tensor<6xbf16>
    zgraph.assign %hb into %cb : tensor<6xbf16> into tensor<6xbf16>
    %c = zgraph.param "c" trainable : tensor<4xf32>
    %gc = zgraph.state "c" kind = "grad" : tensor<4xf32>
    %mc = zgraph.state "c" kind = "exp_avg" : tensor<4xf32>
    %vc = zgraph.state "c" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %c, %gc, %mc, %vc, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    %cc = zgraph.state "c" kind = "copy" : tensor<4xf16>
    %hc = zgraph.cast %c : tensor<4xf32> -> tensor<4xf16>
    zgraph.assign %hc into %cc : tensor<4xf16> into tensor<4xf16>
    %d = zgraph.param "d" trainable : tensor<4xf32>
    %gd = zgraph.state "d" kind = "grad" : tensor<4xf32>
    %md = zgraph.state "d" kind = "exp_avg" : tensor<4xf32>
    %vd = zgraph.state "d" kind = "exp_avg_sq" : tensor<4xf32>
    zgraph.adamw %d, %gd, %md, %vd, %scalars {adam_w_mode = true} : tensor<4xf32>, tensor<8xf64>
    return
  }
}
