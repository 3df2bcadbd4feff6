// RUN: zcc-opt %s -split-input-file -verify-diagnostics

// The plan sizes every buffer at compile time.
func.func @dynamic_shape() {
  // expected-error @+1 {{'zgraph.param' op requires static shapes, but got 'tensor<?x4xf32>'}}
  %w = zgraph.param "w" : tensor<?x4xf32>
  return
}

// -----

// The weight manifest keys parameters by name.
func.func @empty_param_name() {
  // expected-error @+1 {{requires a non-empty parameter name}}
  %w = zgraph.param "" : tensor<4xf32>
  return
}

// -----

// Trailing dimensions 3 and 4 differ and neither is 1.
func.func @not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{operand shapes 'tensor<2x3xf32>' and 'tensor<2x4xf32>' are not broadcast-compatible}}
  %0 = zgraph.add %a, %b : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// The operands broadcast, but not to the declared result.
func.func @wrong_broadcast_result(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result type 'tensor<4x4xf32>' does not match the broadcast shape of its operands ('tensor<4x3xf32>')}}
  %0 = zgraph.mul %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Only the two ONNX approximations exist.
func.func @gelu_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "erf"}}
  %0 = zgraph.gelu %x {approximate = "erf"} : tensor<4xf32>
  return
}

// -----

// numpy.matmul rejects scalars.
func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operands must have rank at least 1}}
  %0 = zgraph.matmul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// The inner dimensions must agree.
func.func @matmul_contracting(%a: tensor<4x8xf32>, %b: tensor<7x2xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 8 vs 7}}
  %0 = zgraph.matmul %a, %b : (tensor<4x8xf32>, tensor<7x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

// Batch dimensions broadcast like element-wise operands; 2 and 3 do not.
func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x2xf32>) {
  // expected-error @+1 {{batch dimensions are not broadcast-compatible}}
  %0 = zgraph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x2xf32>) -> tensor<2x4x2xf32>
  return
}

// -----

// A rank-1 rhs removes the column dimension from the result.
func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{result type 'tensor<4x1xf32>' does not match the product shape 'tensor<4xf32>'}}
  %0 = zgraph.matmul %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x1xf32>
  return
}

// -----

// Axis 2 does not exist in a rank-2 tensor.
func.func @softmax_axis(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = zgraph.softmax %x axis = 2 : tensor<4x10xf32>
  return
}

// -----

// Normalising from axis 1 of a 2x3x4 tensor needs 3x4 scale and bias.
func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{scale and bias must have the normalised shape 'tensor<3x4xf32>', got 'tensor<4xf32>'}}
  %0 = zgraph.layer_norm %x, %s, %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

// Layer normalisation keeps the input's type.
func.func @layer_norm_result(%x: tensor<2x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{result type 'tensor<2x4xf16>' must equal the input type 'tensor<2x4xf32>'}}
  %0 = zgraph.layer_norm %x, %s, %s axis = -1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf16>
  return
}

// -----

// A zero epsilon divides by zero on a constant row.
func.func @layer_norm_epsilon(%x: tensor<2x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = zgraph.layer_norm %x, %s, %s axis = -1 epsilon = 0.0 : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// A reshape cannot create or drop elements.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 6 elements into 8}}
  %0 = zgraph.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

// The permutation names every input dimension once.
func.func @transpose_perm_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{perm has 3 entries for rank 2}}
  %0 = zgraph.transpose %x perm = [1, 0, 2] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// A repeated index is not a permutation.
func.func @transpose_perm_repeat(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{perm must be a permutation of 0..rank-1}}
  %0 = zgraph.transpose %x perm = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

// The identity permutation keeps the shape.
func.func @transpose_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result type 'tensor<3x2xf32>' does not match the permuted shape 'tensor<2x3xf32>'}}
  %0 = zgraph.transpose %x perm = [0, 1] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// The loss compares element by element, without broadcasting.
func.func @mse_shapes(%p: tensor<4x10xf32>, %t: tensor<10xf32>) {
  // expected-error @+1 {{prediction 'tensor<4x10xf32>' and target 'tensor<10xf32>' must have the same shape}}
  %0 = zgraph.mse_loss %p, %t : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

// A transposed operand swaps its last two dimensions: a vector has none.
func.func @matmul_transposed_vector(%x: tensor<4xf32>, %w: tensor<4x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{a transposed operand must have rank at least 2}}
  %0 = zgraph.matmul %x, %w {transpose_lhs} : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// With transpose_rhs the contraction runs over the rhs's last dimension.
func.func @matmul_transposed_shape(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{contracting dimensions differ: 4 vs 3}}
  %0 = zgraph.matmul %x, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// The bias is one value per output column, of the result's element type.
func.func @matmul_bias_shape(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %b: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{bias 'tensor<2xf32>' must be a vector of the result's last dimension and element type}}
  %0 = zgraph.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// matmul's epilogue knows one activation.
func.func @matmul_activation(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{activation must be "gelu_tanh" or "gelu_tanh_grad", got "relu"}}
  %0 = zgraph.matmul %a, %b {activation = "relu"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

// The GELU's derivative reads the GELU's input, and only it does.
func.func @matmul_gelu_input(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>, %u: tensor<4x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{gelu_input goes with activation "gelu_tanh_grad", and it with it}}
  %0 = zgraph.matmul %a, %b gelu_input %u {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

func.func @matmul_gelu_grad_addend(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>, %u: tensor<4x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{activation "gelu_tanh_grad" takes no bias or addend}}
  %0 = zgraph.matmul %a, %b addend %u gelu_input %u {activation = "gelu_tanh_grad"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

// matmul's aux is what an activation's epilogue writes beside the result.
func.func @matmul_aux_without_activation(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{aux goes with an activation}}
  %0, %1 = zgraph.matmul %a, %b : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>, tensor<4x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

func.func @matmul_gelu_aux_type(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{aux of "gelu_tanh" (the sum before the GELU) must have the result's type 'tensor<4x2xbf16>', got 'tensor<4x2xf32>'}}
  %0, %1 = zgraph.matmul %a, %b {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>, tensor<4x2xf32>
  return %0 : tensor<4x2xbf16>
}

// -----

func.func @matmul_bias_grad_shape(%a: tensor<4x8xbf16>, %b: tensor<8x2xbf16>, %u: tensor<4x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{aux of "gelu_tanh_grad" (the bias gradient) must be a vector of the result's last dimension and element type, got 'tensor<4xbf16>'}}
  %0, %1 = zgraph.matmul %a, %b gelu_input %u {activation = "gelu_tanh_grad"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>, tensor<4xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

// qkv_attention reads the heads of one packed projection.
func.func @qkv_attention_not_packed(%qkv: tensor<2x8x2x2x4xf32>) -> tensor<2x8x2x4xf32> {
  // expected-error @+1 {{'zgraph.qkv_attention' op qkv must be [B, T, 3, H, d] (the query, key and value heads of one projection), got [2, 8, 2, 2, 4]}}
  %o = zgraph.qkv_attention %qkv scale = 0.5 : tensor<2x8x2x2x4xf32> -> tensor<2x8x2x4xf32>
  return %o : tensor<2x8x2x4xf32>
}

// -----

func.func @qkv_attention_result(%qkv: tensor<2x8x3x2x4xf32>) -> tensor<2x2x8x4xf32> {
  // expected-error @+1 {{'zgraph.qkv_attention' op result 'tensor<2x2x8x4xf32>' must be 'tensor<2x8x2x4xf32>'}}
  %o = zgraph.qkv_attention %qkv scale = 0.5 : tensor<2x8x3x2x4xf32> -> tensor<2x2x8x4xf32>
  return %o : tensor<2x2x8x4xf32>
}

// -----

func.func @qkv_attention_lse(%qkv: tensor<2x8x3x2x4xf32>) -> tensor<2x8x2xf32> {
  // expected-error @+1 {{'zgraph.qkv_attention' op lse 'tensor<2x8x2xf32>' must be [B, H, T], [2, 2, 8]}}
  %o, %lse = zgraph.qkv_attention %qkv scale = 0.5 : tensor<2x8x3x2x4xf32> -> tensor<2x8x2x4xf32>, tensor<2x8x2xf32>
  return %lse : tensor<2x8x2xf32>
}

// -----

func.func @qkv_attention_grad_type(%qkv: tensor<2x8x3x2x4xf32>, %dy: tensor<2x8x2x4xf32>) -> tensor<2x8x3x2x4xbf16> {
  // expected-error @+1 {{'zgraph.qkv_attention_grad' op qkv_grad must have the qkv's type}}
  %d = zgraph.qkv_attention_grad %qkv, %dy scale = 0.5 : (tensor<2x8x3x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x3x2x4xbf16>
  return %d : tensor<2x8x3x2x4xbf16>
}

// -----

func.func @qkv_attention_grad_rows(%qkv: tensor<2x8x3x2x4xf32>, %dy: tensor<2x2x8x4xf32>) -> tensor<2x8x3x2x4xf32> {
  // expected-error @+1 {{'zgraph.qkv_attention_grad' op grad 'tensor<2x2x8x4xf32>' must be 'tensor<2x8x2x4xf32>'}}
  %d = zgraph.qkv_attention_grad %qkv, %dy scale = 0.5 : (tensor<2x8x3x2x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x8x3x2x4xf32>
  return %d : tensor<2x8x3x2x4xf32>
}

// -----

// Only 16-bit operands widen, and only to f32.
func.func @matmul_wider_result(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf64> {
  // expected-error @+1 {{'zgraph.matmul' op result element type 'f64' must be the operands' ('f32'), or f32 of f16 or bf16 operands}}
  %y = zgraph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf64>
  return %y : tensor<4x16xf64>
}

// -----

func.func @matmul_widened_bias(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'zgraph.matmul' op an f32 product of 16-bit operands takes no bias, addend or activation}}
  %y = zgraph.matmul %x, %w, %b : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @matmul_mixed_operands(%x: tensor<4x8xbf16>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'zgraph.matmul' op lhs and rhs must have one element type}}
  %y = zgraph.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @qkv_attention_grad_output_alone(%qkv: tensor<2x8x3x2x4xf32>, %dy: tensor<2x8x2x4xf32>) -> tensor<2x8x3x2x4xf32> {
  // expected-error @+1 {{'zgraph.qkv_attention_grad' op saved output and lse go together}}
  %d = "zgraph.qkv_attention_grad"(%qkv, %dy, %dy) {operandSegmentSizes = array<i32: 1, 1, 1, 0>, scale = 5.000000e-01 : f64} : (tensor<2x8x3x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x3x2x4xf32>
  return %d : tensor<2x8x3x2x4xf32>
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ratio must be in (0, 1), got 1}}
  %0 = zgraph.dropout %x {key = 1 : i64, ratio = 1.0 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_state(%x: tensor<4xf32>, %s: tensor<3xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{state must be tensor<2xi64> (the seed and the first sample), got 'tensor<3xi64>'}}
  %0 = zgraph.dropout %x state %s : tensor<3xi64> {key = 1 : i64, ratio = 0.5 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_sample_elements(%x: tensor<4x3xf32>, %s: tensor<2xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{sample_elements 5 must be positive and divide the input's 12 elements}}
  %0 = zgraph.dropout %x state %s : tensor<2xi64> {key = 1 : i64, ratio = 0.5 : f64, sample_elements = 5 : i64} : tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
