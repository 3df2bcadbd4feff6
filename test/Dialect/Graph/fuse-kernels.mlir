// RUN: zcc-opt %s --split-input-file --zcc-graph-fuse-kernels | FileCheck %s

// The backward products of a linear layer: dX = dY W^T and dW = X^T dY.
// Both transposes become flags on the products; nothing is copied.
// CHECK-LABEL: func.func @backward_products
// CHECK-SAME: (%[[X:.*]]: tensor<64x100xbf16>, %[[W:.*]]: tensor<100x10xbf16>, %[[DY:.*]]: tensor<64x10xbf16>)
// CHECK-NEXT: %[[DX:.*]] = zgraph.matmul %[[DY]], %[[W]] {transpose_rhs} : (tensor<64x10xbf16>, tensor<100x10xbf16>) -> tensor<64x100xbf16>
// CHECK-NEXT: %[[DW:.*]] = zgraph.matmul %[[X]], %[[DY]] {transpose_lhs} : (tensor<64x100xbf16>, tensor<64x10xbf16>) -> tensor<100x10xbf16>
// CHECK-NEXT: return %[[DX]], %[[DW]]
func.func @backward_products(%x: tensor<64x100xbf16>, %w: tensor<100x10xbf16>, %dy: tensor<64x10xbf16>) -> (tensor<64x100xbf16>, tensor<100x10xbf16>) {
  %wt = zgraph.transpose %w perm = [1, 0] : tensor<100x10xbf16> -> tensor<10x100xbf16>
  %dx = zgraph.matmul %dy, %wt : (tensor<64x10xbf16>, tensor<10x100xbf16>) -> tensor<64x100xbf16>
  %xt = zgraph.transpose %x perm = [1, 0] : tensor<64x100xbf16> -> tensor<100x64xbf16>
  %dw = zgraph.matmul %xt, %dy : (tensor<100x64xbf16>, tensor<64x10xbf16>) -> tensor<100x10xbf16>
  return %dx, %dw : tensor<64x100xbf16>, tensor<100x10xbf16>
}

// -----

// Batched operands: only a transpose of the last two dimensions folds; one
// that moves a batch dimension stays a copy. A transpose that still has
// other uses stays for them.
// CHECK-LABEL: func.func @batched
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4x5xf32>, %[[B:.*]]: tensor<2x3x4x6xf32>)
// CHECK-NEXT: %[[P:.*]] = zgraph.transpose %[[A]] perm = [1, 0, 2, 3]
// CHECK-NEXT: %[[T:.*]] = zgraph.transpose %[[A]] perm = [0, 1, 3, 2]
// CHECK-NEXT: %[[M:.*]] = zgraph.matmul %[[A]], %[[B]] {transpose_lhs} : (tensor<2x3x4x5xf32>, tensor<2x3x4x6xf32>) -> tensor<2x3x5x6xf32>
// CHECK-NEXT: return %[[M]], %[[T]], %[[P]]
func.func @batched(%a: tensor<2x3x4x5xf32>, %b: tensor<2x3x4x6xf32>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>, tensor<3x2x4x5xf32>) {
  %p = zgraph.transpose %a perm = [1, 0, 2, 3] : tensor<2x3x4x5xf32> -> tensor<3x2x4x5xf32>
  %t = zgraph.transpose %a perm = [0, 1, 3, 2] : tensor<2x3x4x5xf32> -> tensor<2x3x5x4xf32>
  %m = zgraph.matmul %t, %b : (tensor<2x3x5x4xf32>, tensor<2x3x4x6xf32>) -> tensor<2x3x5x6xf32>
  return %m, %t, %p : tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>, tensor<3x2x4x5xf32>
}

// -----

// The gradient of an [out, in] weight (Gemm with transB): transpose(X^T dY)
// is dY^T X, computed in the weight's layout. A transposed product used
// elsewhere too is left as it is.
// CHECK-LABEL: func.func @transposed_product
// CHECK-SAME: (%[[X:.*]]: tensor<8x100xf32>, %[[DY:.*]]: tensor<8x10xf32>)
// CHECK-NEXT: %[[G:.*]] = zgraph.matmul %[[DY]], %[[X]] {transpose_lhs} : (tensor<8x10xf32>, tensor<8x100xf32>) -> tensor<10x100xf32>
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[X]], %[[DY]] {transpose_lhs}
// CHECK-NEXT: %[[PT:.*]] = zgraph.transpose %[[P]] perm = [1, 0]
// CHECK-NEXT: return %[[G]], %[[PT]], %[[P]]
func.func @transposed_product(%x: tensor<8x100xf32>, %dy: tensor<8x10xf32>) -> (tensor<10x100xf32>, tensor<10x100xf32>, tensor<100x10xf32>) {
  %xt = zgraph.transpose %x perm = [1, 0] : tensor<8x100xf32> -> tensor<100x8xf32>
  %g = zgraph.matmul %xt, %dy : (tensor<100x8xf32>, tensor<8x10xf32>) -> tensor<100x10xf32>
  %gt = zgraph.transpose %g perm = [1, 0] : tensor<100x10xf32> -> tensor<10x100xf32>
  %p = zgraph.matmul %xt, %dy : (tensor<100x8xf32>, tensor<8x10xf32>) -> tensor<100x10xf32>
  %pt = zgraph.transpose %p perm = [1, 0] : tensor<100x10xf32> -> tensor<10x100xf32>
  return %gt, %pt, %p : tensor<10x100xf32>, tensor<10x100xf32>, tensor<100x10xf32>
}

// -----

// A bias add after a product becomes its bias operand (either operand
// order, batched rows). Not fused: a bias of another shape (a column), and
// a product with a second use.
// CHECK-LABEL: func.func @bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xbf16>, %[[C:.*]]: tensor<4x1xbf16>)
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[Z:.*]] = zgraph.add %[[P]], %[[C]]
// CHECK-NEXT: %[[Q:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[V:.*]] = zgraph.add %[[B]], %[[Q]]
// CHECK-NEXT: return %[[Y]], %[[Z]], %[[V]], %[[Q]]
func.func @bias(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %c: tensor<4x1xbf16>) -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) {
  %0 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %y = zgraph.add %b, %0 : (tensor<16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  %1 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %z = zgraph.add %1, %c : (tensor<2x4x16xbf16>, tensor<4x1xbf16>) -> tensor<2x4x16xbf16>
  %2 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %v = zgraph.add %b, %2 : (tensor<16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  return %y, %z, %v, %2 : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>
}

// -----

// A residual add after a product (either operand order, after its bias)
// becomes the product's addend, and a bias added after the residual joins
// it too. Not fused: a product with a second use, and an add that
// broadcasts (the other operand is not of the product's type).
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xbf16>, %[[R:.*]]: tensor<2x4x16xbf16>, %[[C:.*]]: tensor<4x16xbf16>)
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %[[X]], %[[W]], %[[B]] addend %[[R]] : (tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[Z:.*]] = zgraph.matmul %[[X]], %[[W]] addend %[[Y]] : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[V:.*]] = zgraph.matmul %[[X]], %[[W]], %[[B]] addend %[[R]] :
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[U:.*]] = zgraph.add %[[P]], %[[R]]
// CHECK-NEXT: %[[Q:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[S:.*]] = zgraph.add %[[Q]], %[[C]]
// CHECK-NEXT: return %[[Y]], %[[Z]], %[[V]], %[[U]], %[[P]], %[[S]]
func.func @residual(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %r: tensor<2x4x16xbf16>, %c: tensor<4x16xbf16>) -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) {
  %0 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %1 = zgraph.add %0, %b : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
  %y = zgraph.add %r, %1 : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  %2 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %z = zgraph.add %2, %y : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  %3 = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %4 = zgraph.add %3, %r : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  %v = zgraph.add %4, %b : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
  %p = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %u = zgraph.add %p, %r : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  %q = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %s = zgraph.add %q, %c : (tensor<2x4x16xbf16>, tensor<4x16xbf16>) -> tensor<2x4x16xbf16>
  return %y, %z, %v, %u, %p, %s : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>
}

// -----

// GELU's tanh form after a 16-bit product (and its bias) becomes the
// product's activation; where gelu_grad reads the product too (training),
// the product keeps it as aux (cuBLASLt's GELU_AUX) for that reader. Not
// fused: the erf form, an f32 product, and a product with an addend (the
// GELU would have to come before the residual).
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xbf16>, %[[R:.*]]: tensor<4x16xbf16>, %[[XF:.*]]: tensor<4x8xf32>, %[[WF:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[H:.*]] = zgraph.matmul %[[X]], %[[W]], %[[B]] {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[E:.*]] = zgraph.gelu %[[P]] :
// CHECK-NEXT: %[[PF:.*]] = zgraph.matmul %[[XF]], %[[WF]] :
// CHECK-NEXT: %[[F:.*]] = zgraph.gelu %[[PF]] {approximate = "tanh"}
// CHECK-NEXT: %[[T:.*]], %[[Q:.*]] = zgraph.matmul %[[X]], %[[W]] {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>, tensor<4x16xbf16>
// CHECK-NEXT: %[[D:.*]] = zgraph.gelu_grad %[[Q]], %[[R]]
// CHECK-NEXT: %[[S:.*]] = zgraph.matmul %[[X]], %[[W]] addend %[[R]] :
// CHECK-NEXT: %[[G:.*]] = zgraph.gelu %[[S]] {approximate = "tanh"}
// CHECK-NEXT: return %[[H]], %[[E]], %[[F]], %[[T]], %[[D]], %[[G]]
func.func @gelu(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %r: tensor<4x16xbf16>, %xf: tensor<4x8xf32>, %wf: tensor<8x16xf32>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %0 = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %1 = zgraph.add %0, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  %h = zgraph.gelu %1 {approximate = "tanh"} : tensor<4x16xbf16>
  %p = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %e = zgraph.gelu %p : tensor<4x16xbf16>
  %pf = zgraph.matmul %xf, %wf : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %f = zgraph.gelu %pf {approximate = "tanh"} : tensor<4x16xf32>
  %q = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %t = zgraph.gelu %q {approximate = "tanh"} : tensor<4x16xbf16>
  %d = zgraph.gelu_grad %q, %r {approximate = "tanh"} : tensor<4x16xbf16>
  %s = zgraph.matmul %x, %w addend %r : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %g = zgraph.gelu %s {approximate = "tanh"} : tensor<4x16xbf16>
  return %h, %e, %f, %t, %d, %g : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// The gradient of GELU's tanh form whose output gradient is a 16-bit
// product becomes that product's DGELU epilogue, reading the GELU's input.
// Not fused: the erf form, an f32 product, and a product with a second use.
// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: (%[[DY:.*]]: tensor<4x16xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[U:.*]]: tensor<4x8xbf16>, %[[DYF:.*]]: tensor<4x16xf32>, %[[WF:.*]]: tensor<8x16xf32>, %[[UF:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[DU:.*]] = zgraph.matmul %[[DY]], %[[W]] gelu_input %[[U]] {activation = "gelu_tanh_grad", transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[DY]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[E:.*]] = zgraph.gelu_grad %[[U]], %[[P]] :
// CHECK-NEXT: %[[PF:.*]] = zgraph.matmul %[[DYF]], %[[WF]] {transpose_rhs}
// CHECK-NEXT: %[[F:.*]] = zgraph.gelu_grad %[[UF]], %[[PF]] {approximate = "tanh"}
// CHECK-NEXT: %[[Q:.*]] = zgraph.matmul %[[DY]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[T:.*]] = zgraph.gelu_grad %[[U]], %[[Q]] {approximate = "tanh"}
// CHECK-NEXT: return %[[DU]], %[[E]], %[[F]], %[[T]], %[[Q]]
func.func @gelu_grad(%dy: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %u: tensor<4x8xbf16>, %dyf: tensor<4x16xf32>, %wf: tensor<8x16xf32>, %uf: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %0 = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %du = zgraph.gelu_grad %u, %0 {approximate = "tanh"} : tensor<4x8xbf16>
  %p = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %e = zgraph.gelu_grad %u, %p : tensor<4x8xbf16>
  %pf = zgraph.matmul %dyf, %wf {transpose_rhs} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %f = zgraph.gelu_grad %uf, %pf {approximate = "tanh"} : tensor<4x8xf32>
  %q = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %t = zgraph.gelu_grad %u, %q {approximate = "tanh"} : tensor<4x8xbf16>
  return %du, %e, %f, %t, %q : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// A GELU whose output the backward pass recomputes (a second gelu of the
// same product, made by the recomputation) keeps its kernel, so that the
// forward's and the clone's outputs have the same bits; the other folds
// into its product with the GELU's input as aux.
// CHECK-LABEL: func.func @gelu_aux_recomputed
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[DH:.*]]: tensor<4x16xbf16>)
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[X]], %[[W]] :
// CHECK-NEXT: %[[H:.*]] = zgraph.gelu %[[P]] {approximate = "tanh"}
// CHECK-NEXT: %[[H2:.*]] = zgraph.gelu %[[P]] {approximate = "tanh"}
// CHECK-NEXT: %[[D:.*]] = zgraph.gelu_grad %[[P]], %[[DH]]
// CHECK-NEXT: return %[[H]], %[[H2]], %[[D]]
func.func @gelu_aux_recomputed(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %dh: tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %p = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %h = zgraph.gelu %p {approximate = "tanh"} : tensor<4x16xbf16>
  %h2 = zgraph.gelu %p {approximate = "tanh"} : tensor<4x16xbf16>
  %d = zgraph.gelu_grad %p, %dh {approximate = "tanh"} : tensor<4x16xbf16>
  return %h, %h2, %d : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// The bias gradient before a GELU (the sums over every row of the DGELU
// product's result) becomes the product's aux. Not
// fused: a sum over fewer dimensions, one with keepdims, and a sum of a
// product without the DGELU epilogue (zdist's bias gradients of other
// layers).
// CHECK-LABEL: func.func @gelu_grad_bias
// CHECK-SAME: (%[[DY:.*]]: tensor<2x4x16xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[U:.*]]: tensor<2x4x8xbf16>)
// CHECK-NEXT: %[[DU:.*]], %[[DB:.*]] = zgraph.matmul %[[DY]], %[[W]] gelu_input %[[U]] {activation = "gelu_tanh_grad", transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>, tensor<8xbf16>
// CHECK-NEXT: %[[DU2:.*]] = zgraph.matmul %[[DY]], %[[W]] gelu_input %[[U]] {activation = "gelu_tanh_grad", transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[S1:.*]] = zgraph.reduce_sum %[[DU2]] axes = [0]
// CHECK-NEXT: %[[S2:.*]] = zgraph.reduce_sum %[[DU2]] axes = [0, 1] keepdims = true
// CHECK-NEXT: %[[P:.*]] = zgraph.matmul %[[DY]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[S3:.*]] = zgraph.reduce_sum %[[P]] axes = [0, 1] keepdims = false
// CHECK-NEXT: return %[[DU]], %[[DB]], %[[S1]], %[[S2]], %[[S3]]
func.func @gelu_grad_bias(%dy: tensor<2x4x16xbf16>, %w: tensor<8x16xbf16>, %u: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<1x1x8xbf16>, tensor<8xbf16>) {
  %0 = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  %du = zgraph.gelu_grad %u, %0 {approximate = "tanh"} : tensor<2x4x8xbf16>
  %db = zgraph.reduce_sum %du axes = [0, 1] keepdims = false : tensor<2x4x8xbf16> -> tensor<8xbf16>
  %1 = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  %du2 = zgraph.gelu_grad %u, %1 {approximate = "tanh"} : tensor<2x4x8xbf16>
  %s1 = zgraph.reduce_sum %du2 axes = [0] keepdims = false : tensor<2x4x8xbf16> -> tensor<4x8xbf16>
  %s2 = zgraph.reduce_sum %du2 axes = [0, 1] keepdims = true : tensor<2x4x8xbf16> -> tensor<1x1x8xbf16>
  %p = zgraph.matmul %dy, %w {transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  %s3 = zgraph.reduce_sum %p axes = [0, 1] keepdims = false : tensor<2x4x8xbf16> -> tensor<8xbf16>
  return %du, %db, %s1, %s2, %s3 : tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<1x1x8xbf16>, tensor<8xbf16>
}

// -----

// The gradient of a three-way Split (q, k, v out of one product): the
// zero-padded slice gradients and their sum become one concatenation, in
// the order of the windows whatever the order of the adds.
// CHECK-LABEL: func.func @split_gradient
// CHECK-SAME: (%[[DQ:.*]]: tensor<2x4x8xf32>, %[[DK:.*]]: tensor<2x4x8xf32>, %[[DV:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[C:.*]] = zgraph.concat %[[DQ]], %[[DK]], %[[DV]] axis = 2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
// CHECK-NEXT: return %[[C]]
func.func @split_gradient(%dq: tensor<2x4x8xf32>, %dk: tensor<2x4x8xf32>, %dv: tensor<2x4x8xf32>) -> tensor<2x4x24xf32> {
  %v = zgraph.slice_grad %dv starts = [0, 0, 16] limits = [2, 4, 24] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %k = zgraph.slice_grad %dk starts = [0, 0, 8] limits = [2, 4, 16] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %0 = zgraph.add %v, %k : (tensor<2x4x24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %q = zgraph.slice_grad %dq starts = [0, 0, 0] limits = [2, 4, 8] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %1 = zgraph.add %0, %q : (tensor<2x4x24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  return %1 : tensor<2x4x24xf32>
}

// -----

// Sums that are not a tiling stay: a gap (only q and v) and overlapping
// windows. Windows on two axes do not fold as a whole, but the two halves
// along axis 0 inside the sum do.
// CHECK-LABEL: func.func @not_a_tiling
// CHECK-SAME: (%[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<2x8xf32>, %[[C:.*]]: tensor<2x16xf32>, %[[D:.*]]: tensor<1x24xf32>)
// CHECK: %[[QV:.*]] = zgraph.add
// CHECK-NOT: zgraph.concat
// CHECK: %[[QO:.*]] = zgraph.add
// CHECK-NEXT: %[[V2:.*]] = zgraph.slice_grad %[[B]] starts = [0, 16]
// CHECK-NEXT: %[[ROWS:.*]] = zgraph.concat %[[D]], %[[D]] axis = 0
// CHECK-NEXT: %[[SUM:.*]] = zgraph.add %[[ROWS]], %[[V2]]
// CHECK-NEXT: return %[[QV]], %[[QO]], %[[SUM]]
func.func @not_a_tiling(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %c: tensor<2x16xf32>, %d: tensor<1x24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<2x24xf32>) {
  %q = zgraph.slice_grad %a starts = [0, 0] limits = [2, 8] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x24xf32>
  %v = zgraph.slice_grad %b starts = [0, 16] limits = [2, 24] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x24xf32>
  %0 = zgraph.add %q, %v : (tensor<2x24xf32>, tensor<2x24xf32>) -> tensor<2x24xf32>
  %q2 = zgraph.slice_grad %a starts = [0, 0] limits = [2, 8] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x24xf32>
  %o = zgraph.slice_grad %c starts = [0, 4] limits = [2, 20] strides = [1, 1] : tensor<2x16xf32> -> tensor<2x24xf32>
  %1 = zgraph.add %q2, %o : (tensor<2x24xf32>, tensor<2x24xf32>) -> tensor<2x24xf32>
  %r0 = zgraph.slice_grad %d starts = [0, 0] limits = [1, 24] strides = [1, 1] : tensor<1x24xf32> -> tensor<2x24xf32>
  %r1 = zgraph.slice_grad %d starts = [1, 0] limits = [2, 24] strides = [1, 1] : tensor<1x24xf32> -> tensor<2x24xf32>
  %v2 = zgraph.slice_grad %b starts = [0, 16] limits = [2, 24] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x24xf32>
  %2 = zgraph.add %r0, %r1 : (tensor<2x24xf32>, tensor<2x24xf32>) -> tensor<2x24xf32>
  %3 = zgraph.add %2, %v2 : (tensor<2x24xf32>, tensor<2x24xf32>) -> tensor<2x24xf32>
  return %0, %1, %3 : tensor<2x24xf32>, tensor<2x24xf32>, tensor<2x24xf32>
}

// -----

// A GELU's output read again after the first gradient op (the backward
// pass: the next layer's weight gradient) is recomputed there from its
// input, which gelu_grad reads later anyway; the forward use keeps the
// first one.
// CHECK-LABEL: func.func @recompute_gelu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x2xf32>, %[[T:.*]]: tensor<4x2xf32>, %[[SEED:.*]]: tensor<f32>, %[[DH:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[H:.*]] = zgraph.gelu %[[X]]
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %[[H]], %[[W]]
// CHECK-NEXT: %[[DY:.*]] = zgraph.mse_loss_grad %[[Y]], %[[T]], %[[SEED]]
// CHECK-NEXT: %[[AGAIN:.*]] = zgraph.gelu %[[X]]
// CHECK-NEXT: %[[DW:.*]] = zgraph.matmul %[[AGAIN]], %[[DY]] {transpose_lhs}
// CHECK-NEXT: %[[DX:.*]] = zgraph.gelu_grad %[[X]], %[[DH]]
// CHECK-NEXT: return %[[DW]], %[[DX]]
func.func @recompute_gelu(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %t: tensor<4x2xf32>, %seed: tensor<f32>, %dh: tensor<4x8xf32>) -> (tensor<8x2xf32>, tensor<4x8xf32>) {
  %h = zgraph.gelu %x : tensor<4x8xf32>
  %y = zgraph.matmul %h, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %dy = zgraph.mse_loss_grad %y, %t, %seed : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %ht = zgraph.transpose %h perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %dw = zgraph.matmul %ht, %dy : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %dx = zgraph.gelu_grad %x, %dh : tensor<4x8xf32>
  return %dw, %dx : tensor<8x2xf32>, tensor<4x8xf32>
}

// -----

// The same for a layer norm, whose input and scale layer_norm_grad reads
// later anyway (the bias is small next to the output). Not recomputed: a
// layer norm whose input is dead by its backward use (recomputing would
// keep that input live instead).
// CHECK-LABEL: func.func @recompute_layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<64x16xf32>, %[[Y:.*]]: tensor<64x16xf32>, %[[S:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>, %[[SEED:.*]]: tensor<f32>, %[[DY:.*]]: tensor<64x16xf32>)
// CHECK-NEXT: %[[N:.*]] = zgraph.layer_norm %[[X]], %[[S]], %[[B]]
// CHECK-NEXT: %[[M:.*]] = zgraph.layer_norm %[[Y]], %[[S]], %[[B]]
// CHECK-NEXT: %[[DN:.*]] = zgraph.mse_loss_grad %[[N]], %[[M]], %[[SEED]]
// CHECK-NEXT: %[[AGAIN:.*]] = zgraph.layer_norm %[[X]], %[[S]], %[[B]]
// CHECK-NEXT: %[[DW:.*]] = zgraph.matmul %[[AGAIN]], %[[DY]] {transpose_lhs}
// CHECK-NEXT: %[[DM:.*]] = zgraph.matmul %[[M]], %[[DY]] {transpose_lhs}
// CHECK-NEXT: = zgraph.layer_norm_grad %[[X]], %[[S]], %[[DN]]
// CHECK-NEXT: return
func.func @recompute_layer_norm(%x: tensor<64x16xf32>, %y: tensor<64x16xf32>, %s: tensor<16xf32>, %b: tensor<16xf32>, %seed: tensor<f32>, %dy: tensor<64x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<64x16xf32>) {
  %n = zgraph.layer_norm %x, %s, %b axis = 1 epsilon = 1.0e-5 : (tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
  %m = zgraph.layer_norm %y, %s, %b axis = 1 epsilon = 1.0e-5 : (tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
  %dn = zgraph.mse_loss_grad %n, %m, %seed : (tensor<64x16xf32>, tensor<64x16xf32>, tensor<f32>) -> tensor<64x16xf32>
  %nt = zgraph.transpose %n perm = [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %dw = zgraph.matmul %nt, %dy : (tensor<16x64xf32>, tensor<64x16xf32>) -> tensor<16x16xf32>
  %mt = zgraph.transpose %m perm = [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %dm = zgraph.matmul %mt, %dy : (tensor<16x64xf32>, tensor<64x16xf32>) -> tensor<16x16xf32>
  %g:3 = zgraph.layer_norm_grad %x, %s, %dn axis = 1 epsilon = 1.0e-5 : (tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>) -> (tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %dw, %dm, %g#0 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<64x16xf32>
}

// -----

// An attention and its backward in one function: the forward also returns
// each row's log-sum-exp and the backward reads it and the forward's result.
// A gradient of other operands (no forward of its own here) stays as it is.
// CHECK-LABEL: func.func @attention_saves_statistics
// CHECK: %[[O:.*]], %[[LSE:.*]] = zgraph.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] scale = 2.500000e-01 causal : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>, tensor<2x8xf32>
// CHECK: zgraph.attention_grad %[[Q]], %[[K]], %[[V]], %{{.*}} saved(%[[O]], %[[LSE]] : tensor<2x8x16xbf16>, tensor<2x8xf32>) scale = 2.500000e-01 causal
// CHECK: zgraph.attention_grad %[[K]], %[[Q]], %[[V]], %{{.*}} scale = 2.500000e-01 causal :
func.func @attention_saves_statistics(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>,
                                      %v: tensor<2x8x16xbf16>, %dy: tensor<2x8x16xbf16>)
    -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  %o = zgraph.attention %q, %k, %v scale = 0.25 causal : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %g:3 = zgraph.attention_grad %q, %k, %v, %dy scale = 0.25 causal : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
  %h:3 = zgraph.attention_grad %k, %q, %v, %dy scale = 0.25 causal : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
  return %o, %g#0, %g#1, %h#2 : tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
}

// -----

// The heads of one fused projection, their attention and its backward: the
// attention reads the projection viewed [B, T, 3, H, d] in place and writes
// [B, T, H, d]; its gradient is the projection's, [B, T, 3, H, d], viewed
// back as the concatenation it replaces. No head is transposed or sliced.
// CHECK-LABEL: func.func @qkv_attention
// CHECK-SAME: (%[[P:.*]]: tensor<2x8x24xbf16>, %[[DY:.*]]: tensor<2x8x8xbf16>)
// CHECK-NOT: zgraph.transpose
// CHECK-NOT: zgraph.slice
// CHECK: %[[QKV:.*]] = zgraph.reshape %[[P]] : tensor<2x8x24xbf16> -> tensor<2x8x3x2x4xbf16>
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = zgraph.qkv_attention %[[QKV]] scale = 5.000000e-01 causal : tensor<2x8x3x2x4xbf16> -> tensor<2x8x2x4xbf16>, tensor<2x2x8xf32>
// CHECK-NEXT: %[[OUT:.*]] = zgraph.reshape %[[O]] : tensor<2x8x2x4xbf16> -> tensor<2x8x8xbf16>
// CHECK-NEXT: %[[G:.*]] = zgraph.reshape %[[DY]] : tensor<2x8x8xbf16> -> tensor<2x8x2x4xbf16>
// CHECK-NEXT: %[[DQKV:.*]] = zgraph.qkv_attention_grad %[[QKV]], %[[G]] saved(%[[O]], %[[LSE]] : tensor<2x8x2x4xbf16>, tensor<2x2x8xf32>) scale = 5.000000e-01 causal
// CHECK-NEXT: %[[DP:.*]] = zgraph.reshape %[[DQKV]] : tensor<2x8x3x2x4xbf16> -> tensor<2x8x24xbf16>
// CHECK-NEXT: return %[[OUT]], %[[DP]]
func.func @qkv_attention(%p: tensor<2x8x24xbf16>, %dy: tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x24xbf16>) {
  %s0 = zgraph.slice %p starts = [0, 0, 0] limits = [2, 8, 8] strides = [1, 1, 1] : tensor<2x8x24xbf16> -> tensor<2x8x8xbf16>
  %s1 = zgraph.slice %p starts = [0, 0, 8] limits = [2, 8, 16] strides = [1, 1, 1] : tensor<2x8x24xbf16> -> tensor<2x8x8xbf16>
  %s2 = zgraph.slice %p starts = [0, 0, 16] limits = [2, 8, 24] strides = [1, 1, 1] : tensor<2x8x24xbf16> -> tensor<2x8x8xbf16>
  %r0 = zgraph.reshape %s0 : tensor<2x8x8xbf16> -> tensor<2x8x2x4xbf16>
  %r1 = zgraph.reshape %s1 : tensor<2x8x8xbf16> -> tensor<2x8x2x4xbf16>
  %r2 = zgraph.reshape %s2 : tensor<2x8x8xbf16> -> tensor<2x8x2x4xbf16>
  %q = zgraph.transpose %r0 perm = [0, 2, 1, 3] : tensor<2x8x2x4xbf16> -> tensor<2x2x8x4xbf16>
  %k = zgraph.transpose %r1 perm = [0, 2, 1, 3] : tensor<2x8x2x4xbf16> -> tensor<2x2x8x4xbf16>
  %v = zgraph.transpose %r2 perm = [0, 2, 1, 3] : tensor<2x8x2x4xbf16> -> tensor<2x2x8x4xbf16>
  %o = zgraph.attention %q, %k, %v scale = 0.5 causal : (tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>) -> tensor<2x2x8x4xbf16>
  %ot = zgraph.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x8x4xbf16> -> tensor<2x8x2x4xbf16>
  %out = zgraph.reshape %ot : tensor<2x8x2x4xbf16> -> tensor<2x8x8xbf16>
  %gr = zgraph.reshape %dy : tensor<2x8x8xbf16> -> tensor<2x8x2x4xbf16>
  %g = zgraph.transpose %gr perm = [0, 2, 1, 3] : tensor<2x8x2x4xbf16> -> tensor<2x2x8x4xbf16>
  %d:3 = zgraph.attention_grad %q, %k, %v, %g scale = 0.5 causal : (tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>) -> (tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>)
  %t0 = zgraph.transpose %d#0 perm = [0, 2, 1, 3] : tensor<2x2x8x4xbf16> -> tensor<2x8x2x4xbf16>
  %t1 = zgraph.transpose %d#1 perm = [0, 2, 1, 3] : tensor<2x2x8x4xbf16> -> tensor<2x8x2x4xbf16>
  %t2 = zgraph.transpose %d#2 perm = [0, 2, 1, 3] : tensor<2x2x8x4xbf16> -> tensor<2x8x2x4xbf16>
  %m0 = zgraph.reshape %t0 : tensor<2x8x2x4xbf16> -> tensor<2x8x8xbf16>
  %m1 = zgraph.reshape %t1 : tensor<2x8x2x4xbf16> -> tensor<2x8x8xbf16>
  %m2 = zgraph.reshape %t2 : tensor<2x8x2x4xbf16> -> tensor<2x8x8xbf16>
  %dp = zgraph.concat %m0, %m1, %m2 axis = 2 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x24xbf16>
  return %out, %dp : tensor<2x8x8xbf16>, tensor<2x8x24xbf16>
}

// -----

// Gradients of the heads that are not concatenated back, and a forward
// result read as [B, H, T, d]: each becomes a slice of the packed
// gradient or a transpose of the packed result, so every reader still
// gets its own layout.
// CHECK-LABEL: func.func @qkv_attention_pieces
// CHECK: %[[QKV:.*]] = zgraph.reshape %{{.*}} : tensor<2x8x24xf32> -> tensor<2x8x3x2x4xf32>
// CHECK: %[[O:.*]], %{{.*}} = zgraph.qkv_attention %[[QKV]] scale = 5.000000e-01 :
// CHECK-NEXT: %[[OH:.*]] = zgraph.transpose %[[O]] perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: %[[G:.*]] = zgraph.transpose %{{.*}} perm = [0, 2, 1, 3] : tensor<2x2x8x4xf32> -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[D:.*]] = zgraph.qkv_attention_grad %[[QKV]], %[[G]] saved(%[[O]]
// CHECK-NEXT: %[[S0:.*]] = zgraph.slice %[[D]] starts = [0, 0, 0, 0, 0] limits = [2, 8, 1, 2, 4]
// CHECK-NEXT: %[[R0:.*]] = zgraph.reshape %[[S0]] : tensor<2x8x1x2x4xf32> -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[DQ:.*]] = zgraph.transpose %[[R0]] perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
// CHECK: zgraph.slice %[[D]] starts = [0, 0, 2, 0, 0] limits = [2, 8, 3, 2, 4]
// CHECK: return %[[OH]], %[[DQ]],
func.func @qkv_attention_pieces(%p: tensor<2x8x24xf32>, %g: tensor<2x2x8x4xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) {
  %s0 = zgraph.slice %p starts = [0, 0, 0] limits = [2, 8, 8] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s1 = zgraph.slice %p starts = [0, 0, 8] limits = [2, 8, 16] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s2 = zgraph.slice %p starts = [0, 0, 16] limits = [2, 8, 24] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %r0 = zgraph.reshape %s0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r1 = zgraph.reshape %s1 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r2 = zgraph.reshape %s2 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %q = zgraph.transpose %r0 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %k = zgraph.transpose %r1 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %v = zgraph.transpose %r2 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %o = zgraph.attention %q, %k, %v scale = 0.5 : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  %d:3 = zgraph.attention_grad %q, %k, %v, %g scale = 0.5 : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
  return %o, %d#0, %d#1, %d#2 : tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
}

// -----

// A head read by something other than the attention keeps the slices (the
// one transpose of splitHeadsOnce): the attention is not packed.
// CHECK-LABEL: func.func @qkv_head_read_elsewhere
// CHECK-NOT: zgraph.qkv_attention
// CHECK: zgraph.transpose %{{.*}} perm = [2, 0, 3, 1, 4]
// CHECK: zgraph.attention
func.func @qkv_head_read_elsewhere(%p: tensor<2x8x24xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) {
  %s0 = zgraph.slice %p starts = [0, 0, 0] limits = [2, 8, 8] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s1 = zgraph.slice %p starts = [0, 0, 8] limits = [2, 8, 16] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s2 = zgraph.slice %p starts = [0, 0, 16] limits = [2, 8, 24] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %r0 = zgraph.reshape %s0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r1 = zgraph.reshape %s1 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r2 = zgraph.reshape %s2 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %q = zgraph.transpose %r0 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %k = zgraph.transpose %r1 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %v = zgraph.transpose %r2 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %o = zgraph.attention %q, %k, %v scale = 0.5 : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  return %o, %k : tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
}

// -----

// A 16-bit product whose only reader is a cast to f32 writes the f32 sum
// itself; a gradient the step accumulates, a product with a bias and an f32
// product cast to f64 keep their casts.
// CHECK-LABEL: func.func @widened
// CHECK: zgraph.state
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[G:.*]] = zgraph.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[GW:.*]] = zgraph.cast %[[G]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: zgraph.accumulate %[[GW]] into
// CHECK: zgraph.cast %{{.*}} : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: zgraph.cast %{{.*}} : tensor<4x16xf32> -> tensor<4x16xf64>
// CHECK: return %[[Y]],
func.func @widened(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>,
                   %xf: tensor<4x8xf32>, %wf: tensor<8x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf64>) {
  %acc = zgraph.state "w.grad" kind = "grad" : tensor<4x16xf32>
  %y = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %yf = zgraph.cast %y : tensor<4x16xbf16> -> tensor<4x16xf32>
  %g = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %gf = zgraph.cast %g : tensor<4x16xbf16> -> tensor<4x16xf32>
  zgraph.accumulate %gf into %acc : tensor<4x16xf32> into tensor<4x16xf32>
  %p = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %pb = zgraph.add %p, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  %pf = zgraph.cast %pb : tensor<4x16xbf16> -> tensor<4x16xf32>
  %q = zgraph.matmul %xf, %wf : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %qd = zgraph.cast %q : tensor<4x16xf32> -> tensor<4x16xf64>
  return %yf, %pf, %qd : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf64>
}

// -----

// Through a reshape (the logits flattened for the loss): the product
// writes f32 and the reshape views it; a reshape with another reader keeps
// the cast.
// CHECK-LABEL: func.func @widened_through_reshape
// CHECK-NEXT: %[[Y:.*]] = zgraph.matmul %arg0, %arg1 : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[R:.*]] = zgraph.reshape %[[Y]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[Z:.*]] = zgraph.matmul %arg0, %arg1 : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[S:.*]] = zgraph.reshape %[[Z]] : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT: %[[SF:.*]] = zgraph.cast %[[S]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[R]], %[[SF]], %[[S]]
func.func @widened_through_reshape(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>) {
  %y = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %r = zgraph.reshape %y : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
  %rf = zgraph.cast %r : tensor<8x16xbf16> -> tensor<8x16xf32>
  %z = zgraph.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %s = zgraph.reshape %z : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
  %sf = zgraph.cast %s : tensor<8x16xbf16> -> tensor<8x16xf32>
  return %rf, %sf, %s : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>
}

// -----

// The f32 loss gradient narrowed to bf16 for the head's backward product is
// written in bf16 by its kernel; one with another reader keeps its cast.
// CHECK-LABEL: func.func @narrowed_loss_grad
// CHECK-NEXT: %[[G:.*]] = zgraph.cross_entropy_grad %arg0, %arg1, %arg2 {{.*}} -> tensor<8x16xbf16>
// CHECK-NEXT: %[[H:.*]] = zgraph.nll_loss_grad %arg0, %arg1, %arg2 {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: %[[HC:.*]] = zgraph.cast %[[H]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-NEXT: return %[[G]], %[[HC]], %[[H]]
func.func @narrowed_loss_grad(%x: tensor<8x16xf32>, %l: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xf32>) {
  %d = zgraph.cross_entropy_grad %x, %l, %g : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  %dc = zgraph.cast %d : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = zgraph.nll_loss_grad %x, %l, %g : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  %hc = zgraph.cast %h : tensor<8x16xf32> -> tensor<8x16xbf16>
  return %dc, %hc, %h : tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xf32>
}

// -----

// A head that a gradient also reads as its result gradient is read beyond
// the attention's query, key and value: nothing is packed.
// CHECK-LABEL: func.func @qkv_head_as_gradient
// CHECK-NOT: zgraph.qkv_attention
// CHECK: zgraph.attention_grad
func.func @qkv_head_as_gradient(%p: tensor<2x8x24xf32>) -> tensor<2x2x8x4xf32> {
  %s0 = zgraph.slice %p starts = [0, 0, 0] limits = [2, 8, 8] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s1 = zgraph.slice %p starts = [0, 0, 8] limits = [2, 8, 16] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %s2 = zgraph.slice %p starts = [0, 0, 16] limits = [2, 8, 24] strides = [1, 1, 1] : tensor<2x8x24xf32> -> tensor<2x8x8xf32>
  %r0 = zgraph.reshape %s0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r1 = zgraph.reshape %s1 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %r2 = zgraph.reshape %s2 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %q = zgraph.transpose %r0 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %k = zgraph.transpose %r1 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %v = zgraph.transpose %r2 perm = [0, 2, 1, 3] : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %d:3 = zgraph.attention_grad %q, %k, %v, %q scale = 0.5 : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
  return %d#0 : tensor<2x2x8x4xf32>
}

// -----

// The residual stream's gradient added to a layer norm's input gradient
// joins it in the layer norm's gradient (its addend): the add is gone. An
// addend computed after the gradient, or a gradient read twice, stays an
// add.
// CHECK-LABEL: func.func @layer_norm_grad_addend
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xbf16>, %[[S:.*]]: tensor<16xbf16>, %[[DY:.*]]: tensor<4x16xbf16>, %[[R:.*]]: tensor<4x16xbf16>)
// CHECK-NEXT: %[[G:[a-z_0-9]+]], %{{.*}}, %{{.*}} = zgraph.layer_norm_grad %[[X]], %[[S]], %[[DY]] addend %[[R]] axis = 1
// CHECK-NEXT: %[[H:[a-z_0-9]+]], %{{.*}}, %{{.*}} = zgraph.layer_norm_grad %[[X]], %[[S]], %[[DY]] axis = 1
// CHECK-NEXT: %[[LATE:.*]] = zgraph.exp %[[DY]]
// CHECK-NEXT: zgraph.add %[[H]], %[[LATE]]
// CHECK-NEXT: %[[K:[a-z_0-9]+]], %{{.*}}, %{{.*}} = zgraph.layer_norm_grad %[[X]], %[[S]], %[[DY]] axis = 1
// CHECK-NEXT: zgraph.add %[[R]], %[[K]]
// CHECK-NEXT: return %[[G]],
func.func @layer_norm_grad_addend(%x: tensor<4x16xbf16>, %s: tensor<16xbf16>, %dy: tensor<4x16xbf16>, %r: tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %g:3 = zgraph.layer_norm_grad %x, %s, %dy axis = 1 epsilon = 1.0e-5 : (tensor<4x16xbf16>, tensor<16xbf16>, tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  %a = zgraph.add %r, %g#0 : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  %h:3 = zgraph.layer_norm_grad %x, %s, %dy axis = 1 epsilon = 1.0e-5 : (tensor<4x16xbf16>, tensor<16xbf16>, tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  %late = zgraph.exp %dy : tensor<4x16xbf16>
  %b = zgraph.add %h#0, %late : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  %k:3 = zgraph.layer_norm_grad %x, %s, %dy axis = 1 epsilon = 1.0e-5 : (tensor<4x16xbf16>, tensor<16xbf16>, tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  %c = zgraph.add %r, %k#0 : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %a, %b, %c, %k#0 : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>
}
