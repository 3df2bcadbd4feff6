#!/usr/bin/python3
"""Writes a tiny float64 training model around one zgraph op, for gradient checks.

  gradcheck_models.py OP -o MODEL.onnx [--batch B] [--list]

Each model (--list names them) holds ONNX nodes that the importer maps to
one zgraph op, and feeds that op operands that are all trainable float64
initializers, so `zrun --check-gradients` compares every operand's analytic
gradient with central finite differences.
The first operand is `p + 1e-3 * x`, where x is the float64 graph input
[B, ...] that zrun's training data fills (N(0, 1) from the synthetic source);
the 1e-3 keeps each element within a few thousandths of the initializer, so
the values chosen here stay away from kinks and ties (Relu's 0, Max's and
ReduceMax's ties) and inside domains (Log, Sqrt, Pow's base). Token ops take an
int64 input [B, T] instead (ids or labels).

The output y gives the loss as ReduceSum(Mul(y, W)), W a fixed random float64
Constant node of y's shape (every float initializer becomes a trainable
parameter; W is not one), so each output element gets its own gradient.
Class losses are the loss themselves (weighted the same way for reduction
"none"); `mse` has no loss: compile it with `zcc --loss mse`.

Needs only numpy and onnx.
"""

import argparse
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F64 = TensorProto.DOUBLE
# The data's N(0, 1) samples enter every first operand scaled by this.
DATA_SCALE = 1e-3
# The IR version ONNX pairs with each opset. onnx 1.12's checker knows opsets
# up to 17: models of a newer one (18 for axes as inputs, 20 for Gelu) are
# written unchecked.
IR_FOR_OPSET = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 20: 9}


class Model:
    """A graph being built: nodes, trainable initializers, Constant nodes."""

    def __init__(self, batch, seed, opset=17):
        self.batch = batch
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inputs = []
        self.initializers = []
        self.outputs = []
        self.count = 0
        self.x = None

    def fresh(self, stem):
        self.count += 1
        return f"{stem}_{self.count}"

    def op(self, op_type, *inputs, n_outputs=1, **attrs):
        outputs = [self.fresh(op_type.lower()) for _ in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=f"/{op_type}_{self.count}", **attrs))
        return outputs[0] if n_outputs == 1 else outputs

    def param(self, name, array):
        """A trainable float64 initializer."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array, np.float64), name))
        return name

    def literal(self, name, array):
        """An initializer the importer folds (integer, boolean or scalar data)."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def const(self, array, dtype=np.float64, stem="const"):
        """A Constant node: fixed data, never a parameter."""
        name = self.fresh(stem)
        tensor = numpy_helper.from_array(np.asarray(array, dtype), name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=f"/{name}", value=tensor))
        return name

    def ints(self, values):
        return self.const(values, np.int64, "ints")

    def input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def data(self, shape):
        """x [B, *shape] scaled by DATA_SCALE (made once; later calls reuse it)."""
        if self.x is None:
            self.x = self.op("Mul", self.input("x", F64, [self.batch, *shape]), self.const(DATA_SCALE))
        return self.x

    def first(self, name, values):
        """The op's first operand, [B, *values.shape]: param + DATA_SCALE * x."""
        return self.op("Add", self.param(name, values), self.data(values.shape))

    # Values.

    def normal(self, *shape):
        return self.rng.standard_normal(shape)

    def away(self, *shape, lo=0.2, hi=1.5, positive=False):
        """Magnitudes in [lo, hi]: no element near 0; signs random unless positive."""
        magnitude = self.rng.uniform(lo, hi, shape)
        return magnitude if positive else magnitude * self.rng.choice([-1.0, 1.0], shape)

    def distinct(self, *shape, axis=-1, gap=0.25):
        """Values along axis a permutation of gap-spaced levels (no ties)."""
        n = shape[axis]
        levels = (np.arange(n) - (n - 1) / 2) * gap
        out = np.empty(shape)
        moved = np.moveaxis(out, axis, -1)
        for index in np.ndindex(*moved.shape[:-1]):
            moved[index] = self.rng.permutation(levels) + self.rng.uniform(-0.02, 0.02, n)
        return out

    # Loss.

    def weighted_sum(self, y, shape):
        """ReduceSum(Mul(y, W)) over every element, W random and fixed."""
        return self.op("ReduceSum", self.op("Mul", y, self.const(self.normal(*shape))), keepdims=0)

    def finish(self, loss_terms, name="loss"):
        loss = loss_terms[0]
        for term in loss_terms[1:]:
            loss = self.op("Add", loss, term)
        self.rename(loss, name)
        self.outputs.append(helper.make_tensor_value_info(name, F64, []))

    def rename(self, old, new):
        for node in self.nodes:
            node.output[:] = [new if t == old else t for t in node.output]
            node.input[:] = [new if t == old else t for t in node.input]

    def model(self, doc):
        graph = helper.make_graph(self.nodes, "gradcheck", self.inputs, self.outputs,
                                  self.initializers, doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="zcc test/E2E/Inputs/gradcheck_models.py")
        model.ir_version = IR_FOR_OPSET[self.opset]
        return model


# Every builder takes the Model and returns (loss terms, doc); shapes below
# leave out the batch dimension B that x brings.

SHAPE = (3, 4)


def build_binary(op_type, rhs="same"):
    """op(a, b): a = p + x [B, 3, 4], b an initializer [3, 4] or [4] (broadcast);
    "swapped": op(b [4], a), the broadcast operand on the left."""

    def build(m):
        a_values = m.away(*SHAPE, lo=0.5, hi=1.5)  # Div: divisor away from 0
        b_shape = SHAPE if rhs == "same" else SHAPE[-1:]
        b_values = m.away(*b_shape, lo=0.5, hi=1.5)
        operands = [m.first("a", a_values), m.param("b", b_values)]
        if rhs == "swapped":
            operands.reverse()
        y = m.op(op_type, *operands)
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"{op_type}(a [B,3,4], b {list(b_shape)}), {rhs}"

    return build


def build_pow(exponent, signed=False):
    """Pow(a, e): e a constant (folded, not trained) or a trainable [4] (then
    a > 0, for log(a)); signed: a of both signs, e an integer constant (as
    Pow(centered, 2) in an exported layer norm)."""

    def build(m):
        a = m.first("a", m.away(*SHAPE, lo=0.5, hi=2.0, positive=not signed))
        if exponent == "param":
            e = m.param("e", m.rng.uniform(0.5, 2.5, SHAPE[-1:]))
        else:
            e = m.literal("e", np.float64(exponent))
        y = m.op("Pow", a, e)
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"Pow(a, {exponent})"

    return build


def build_minmax(op_type, broadcast=False):
    """Max/Min of a [B,3,4] and b [3,4] (or [4], broadcast); the operands
    differ by 0.2 or more everywhere (no ties), each winning about half."""

    def build(m):
        if broadcast:
            b = m.away(4, lo=0.3, hi=1.5)
            base = b + m.rng.choice([-1.0, 1.0], SHAPE) * m.rng.uniform(0.2, 0.5, SHAPE)
        else:
            base = m.away(*SHAPE, lo=0.3, hi=1.5)
            b = base + m.rng.choice([-1.0, 1.0], SHAPE) * m.rng.uniform(0.2, 0.5, SHAPE)
        y = m.op(op_type, m.first("a", base), m.param("b", b))
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"{op_type}{' broadcast' if broadcast else ''}"

    return build


# Unary ops and the range their input is drawn from.
UNARY = {
    "Neg": dict(),
    "Exp": dict(),
    "Sqrt": dict(lo=0.3, hi=2.0, positive=True),
    "Tanh": dict(),
    "Relu": dict(),
    "Sigmoid": dict(),
    "Log": dict(lo=0.3, hi=2.0, positive=True),
    "Erf": dict(),
    "Reciprocal": dict(lo=0.5, hi=2.0),
}


def build_unary(op_type, opset=None, **attrs):
    def build(m):
        if opset:
            m.opset = opset
        y = m.op(op_type, m.first("a", m.away(*SHAPE, **UNARY.get(op_type, {}))), **attrs)
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"{op_type}{attrs or ''}"

    return build


def build_relu_kink(m):
    """For the negative test: Relu(p) + x with p's first row exactly 0, Relu's
    kink, where the analytic gradient (0) and central differences (half the
    weight) disagree."""
    values = m.away(*SHAPE)
    values[0] = 0.0
    y = m.op("Add", m.op("Relu", m.param("a", values)), m.data(SHAPE))
    return [m.weighted_sum(y, (m.batch, *SHAPE))], "Relu at its kink"


def build_matmul(kind):
    """MatMul: a [B,3,4] x W [4,5]; batched [B,3,4] x [B,4,5]; a batch-broadcast
    [1,4,5] rhs; a vector rhs [4]; a vector lhs [3] x [B,3,5]; a matrix lhs
    [3,4] x [B,4,5]; [B,2,3,4] x W [4,5]; both batches broadcast, [B,1,3,4] x
    [1,2,4,5]; a dot product of two vectors [4] (a scalar, times x)."""

    def build(m):
        B = m.batch
        if kind == "vector-lhs":
            v = m.param("v", m.normal(3))
            b = m.first("b", m.normal(3, 5))
            y, shape = m.op("MatMul", v, b), (B, 5)
        elif kind == "matrix-lhs":
            y = m.op("MatMul", m.param("a", m.normal(3, 4)), m.first("b", m.normal(4, 5)))
            shape = (B, 3, 5)
        elif kind == "4d":
            y = m.op("MatMul", m.first("a", m.normal(2, 3, 4)), m.param("b", m.normal(4, 5)))
            shape = (B, 2, 3, 5)
        elif kind == "both-broadcast":
            y = m.op("MatMul", m.first("a", m.normal(1, 3, 4)), m.param("b", m.normal(1, 2, 4, 5)))
            shape = (B, 2, 3, 5)
        elif kind == "dot":
            dot = m.op("MatMul", m.param("u", m.normal(4)), m.param("v", m.normal(4)))
            y, shape = m.op("Mul", dot, m.data((3,))), (B, 3)
        else:
            a = m.first("a", m.normal(*SHAPE))
            rhs = {"2d": (4, 5), "batched": (B, 4, 5), "broadcast": (1, 4, 5), "vector": (4,)}[kind]
            y = m.op("MatMul", a, m.param("b", m.normal(*rhs)))
            shape = (B, 3) if kind == "vector" else (B, 3, 5)
        return [m.weighted_sum(y, shape)], f"MatMul {kind}"

    return build


def build_gemm(trans_a):
    """Gemm (matmul, alpha, beta * C): a [B,4] x b^T (b [5,4], transB), C [5];
    trans_a: a^T x b with a [B,3] (transA), b [B,5], C [3,5]."""

    def build(m):
        if trans_a:
            y = m.op("Gemm", m.param("a", m.normal(m.batch, 3)), m.first("b", m.normal(5)),
                     m.param("c", m.normal(3, 5)), transA=1, alpha=0.75, beta=1.25)
            return [m.weighted_sum(y, (3, 5))], "Gemm transA"
        y = m.op("Gemm", m.first("a", m.normal(4)), m.param("b", m.normal(5, 4)), m.param("c", m.normal(5)),
                 transB=1, alpha=0.75, beta=1.25)
        return [m.weighted_sum(y, (m.batch, 5))], "Gemm transB"

    return build


def build_softmax(op_type, axis):
    def build(m):
        y = m.op(op_type, m.first("a", m.normal(*SHAPE)), axis=axis)
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"{op_type}(axis={axis})"

    return build


def build_reduce(op_type, axes, keepdims):
    """Reduce over axes of a [B,3,4] (axes as an input: opset 18 for all three;
    None: no axes, every axis)."""

    def build(m):
        m.opset = 18
        rank = 1 + len(SHAPE)
        if axes is None:
            values = m.distinct(12).reshape(SHAPE) if op_type == "ReduceMax" else m.normal(*SHAPE)
            y = m.op(op_type, m.first("a", values), keepdims=keepdims)
            return [m.weighted_sum(y, (1, 1, 1) if keepdims else ())], f"{op_type}(all, keepdims={keepdims})"
        values = m.distinct(*SHAPE, axis=axes[0] - 1 if axes[0] > 0 else axes[0]) \
            if op_type == "ReduceMax" else m.normal(*SHAPE)
        y = m.op(op_type, m.first("a", values), m.ints(axes), keepdims=keepdims)
        full = (m.batch, *SHAPE)
        normalized = [a % rank for a in axes]
        shape = tuple(1 if i in normalized else d for i, d in enumerate(full) if keepdims or i not in normalized)
        return [m.weighted_sum(y, shape)], f"{op_type}(axes={axes}, keepdims={keepdims})"

    return build


def build_attention(variant):
    """The exported attention chain the importer fuses into zgraph.attention:
    MatMul(Softmax(scale(MatMul(q, Transpose(k))) [+ mask]), v).

      plain   Div by sqrt(D), no mask
      mul     Mul by a constant, the key laid out [B, T, H, D]
      causal  Div, Where(tril, scores, -1e9)
      add     additive causal mask (an initializer of 0 and -1e9), 3 queries
              against 5 keys (causal aligned at the end)
      shared  causal self-attention of one tensor: q = k = v (three gradients add up)
    """

    def build(m):
        B, H, T, D = m.batch, 2, 4, 3
        if variant == "shared":
            a = m.first("a", m.normal(H, T, D))
            scores = m.op("Div", m.op("MatMul", a, m.op("Transpose", a, perm=[0, 1, 3, 2])), m.const(2.0))
            allowed = np.tril(np.ones((T, T), dtype=bool))[None, None]
            scores = m.op("Where", m.const(allowed, np.bool_), scores, m.const(-1e9))
            y = m.op("MatMul", m.op("Softmax", scores, axis=-1), a)
            return [m.weighted_sum(y, (B, H, T, D))], "attention shared"
        Tq = 3 if variant == "add" else T
        q = m.first("q", m.normal(H, Tq, D))
        key_layout = (B, T, H, D) if variant == "mul" else (B, H, T, D)
        if variant == "add":
            key_layout = (B, H, 5, D)
        Tk = key_layout[1] if variant == "mul" else key_layout[2]
        k = m.param("k", m.normal(*key_layout))
        v = m.param("v", m.normal(B, H, Tk, D))
        kt = m.op("Transpose", k, perm=[0, 2, 3, 1] if variant == "mul" else [0, 1, 3, 2])
        scores = m.op("MatMul", q, kt)
        if variant == "mul":
            scores = m.op("Mul", scores, m.const(0.4))
        else:
            scores = m.op("Div", scores, m.const(math.sqrt(D)))
        allowed = np.tril(np.ones((Tq, Tk), dtype=bool), k=Tk - Tq)[None, None]
        if variant == "causal":
            scores = m.op("Where", m.const(allowed, np.bool_), scores, m.const(-1e9))
        elif variant == "add":
            scores = m.op("Add", scores, m.literal("mask", np.where(allowed, 0.0, -1e9)))
        y = m.op("MatMul", m.op("Softmax", scores, axis=-1), v)
        return [m.weighted_sum(y, (B, H, Tq, D))], f"attention {variant}"

    return build


def build_layer_norm(axis, bias=True):
    def build(m):
        m.opset = 17
        normalized = SHAPE[axis:] if axis < 0 else (m.batch, *SHAPE)[axis:]
        a = m.first("a", m.normal(*SHAPE) * 2.0)
        operands = [a, m.param("scale", m.away(*normalized, lo=0.5, hi=1.5))]
        if bias:
            operands.append(m.param("bias", m.normal(*normalized)))
        y = m.op("LayerNormalization", *operands, axis=axis, epsilon=1e-5)
        return [m.weighted_sum(y, (m.batch, *SHAPE))], f"LayerNormalization(axis={axis})"

    return build


def build_reshape(m):
    y = m.op("Reshape", m.first("a", m.normal(*SHAPE)), m.ints([-1, 2, 6]))
    return [m.weighted_sum(y, (m.batch, 2, 6))], "Reshape [B,3,4] -> [B,2,6]"


def build_transpose(m):
    y = m.op("Transpose", m.first("a", m.normal(2, 3, 4)), perm=[2, 0, 3, 1])
    return [m.weighted_sum(y, (3, m.batch, 4, 2))], "Transpose [B,2,3,4] perm [2,0,3,1]"


def build_concat(shared):
    """Concat on the last axis of [B,3,2], a [B,3,4], [B,3,1]; shared: of a,
    [B,2,4], a on axis 1 (a's two gradients add up)."""

    def build(m):
        a = m.first("a", m.normal(*SHAPE))
        if shared:
            y = m.op("Concat", a, m.param("b", m.normal(m.batch, 2, 4)), a, axis=1)
            return [m.weighted_sum(y, (m.batch, 8, 4))], "Concat of a, [B,2,4], a on axis 1"
        y = m.op("Concat", m.param("b", m.normal(m.batch, 3, 2)), a, m.param("c", m.normal(m.batch, 3, 1)),
                 axis=-1)
        return [m.weighted_sum(y, (m.batch, 3, 7))], "Concat of [B,3,2], a, [B,3,1] on the last axis"

    return build


def build_slice(m):
    a = m.first("a", m.normal(4, 5))
    y = m.op("Slice", a, m.ints([1, 0]), m.ints([3, 5]), m.ints([1, -1]), m.ints([1, 2]))
    return [m.weighted_sum(y, (m.batch, 2, 3))], "Slice [B,4,5] rows 1:3, columns ::2"


def build_pad(m):
    """Pad (constant 0.5) of [B,3,4]: one row before and one fewer after on
    axis 1, one column fewer before and two more after on axis 2 (the
    importer's slices and concats of constants)."""
    a = m.first("a", m.normal(*SHAPE))
    y = m.op("Pad", a, m.ints([0, 1, -1, 0, -1, 2]), m.const(0.5))
    return [m.weighted_sum(y, (m.batch, 3, 5))], "Pad"


def build_split(m):
    m.opset = 18
    a = m.first("a", m.normal(3, 5))
    first, second = m.op("Split", a, m.ints([2, 3]), n_outputs=2, axis=2)
    return ([m.weighted_sum(first, (m.batch, 3, 2)), m.weighted_sum(second, (m.batch, 3, 3))],
            "Split [B,3,5] into 2 and 3 on the last axis")


def build_gather(kind):
    """An embedding: Gather(table [7, 3], ids [B, 4]) (repeated ids add up);
    tied: the same table also projects the result back (GPT-2's lm_head); or
    Gather on axis 1 of a [B, 5, 3] with constant indices, one repeated and
    one negative (-1 is 4, so row 4 is taken three times)."""

    def build(m):
        if kind in ("embedding", "tied"):
            table = m.param("table", m.normal(7, 3))
            y = m.op("Gather", table, m.input("ids", TensorProto.INT64, [m.batch, 4]))
            if kind == "embedding":
                return [m.weighted_sum(y, (m.batch, 4, 3))], "Gather embedding"
            logits = m.op("MatMul", y, m.op("Transpose", table, perm=[1, 0]))
            return [m.weighted_sum(logits, (m.batch, 4, 7))], "Gather embedding tied to the output projection"
        a = m.first("a", m.normal(5, 3))
        y = m.op("Gather", a, m.ints([4, 0, -1, 2, 4]), axis=1)
        return [m.weighted_sum(y, (m.batch, 5, 3))], "Gather axis 1"

    return build


def build_expand(m):
    b = m.op("Expand", m.param("b", m.normal(3, 1)), m.ints([m.batch, 3, 4]))
    y = m.op("Add", b, m.data((3, 4)))
    return [m.weighted_sum(y, (m.batch, 3, 4))], "Expand [3,1] -> [B,3,4]"


def build_trilu(upper, k, shape=(4, 4)):
    def build(m):
        a = m.first("a", m.normal(*shape))
        y = m.op("Trilu", a, m.literal("k", np.int64(k)), upper=upper)
        return [m.weighted_sum(y, (m.batch, *shape))], f"Trilu(upper={upper}, k={k}) of {list(shape)}"

    return build


def build_where(m):
    a = m.first("a", m.normal(*SHAPE))
    b = m.param("b", m.normal(SHAPE[-1]))
    condition = m.const(m.rng.random(SHAPE) < 0.5, np.bool_)
    y = m.op("Where", condition, a, b)
    return [m.weighted_sum(y, (m.batch, *SHAPE))], "Where(constant condition, a, b)"


def build_cast(m):
    narrow = m.op("Cast", m.first("a", m.normal(*SHAPE)), to=TensorProto.FLOAT)
    y = m.op("Cast", m.op("Tanh", narrow), to=TensorProto.DOUBLE)
    return [m.weighted_sum(y, (m.batch, *SHAPE))], "Cast f64 -> f32 (Tanh) -> f64"


def build_mse(m):
    """No loss output: `zcc --loss mse` adds mse_loss against a 'labels' input."""
    y = m.first("a", m.normal(*SHAPE))
    m.rename(y, "y")
    m.outputs.append(helper.make_tensor_value_info("y", F64, [m.batch, *SHAPE]))
    return None, "mse: y = p + x, loss added by zcc --loss mse"


def build_class_loss(op_type, reduction="mean", ignore_index=None, spatial=False, log_prob=False):
    """op_type of scores against labels [B, 8] of 3 classes (16 labels: the
    synthetic data holds ignore_index, as losses.test checks). Scores: [B*8, 3] reshaped
    from p [B, 8, 3]; spatial: [B, 3, 8] (classes on axis 1, as ONNX has
    them for sequences) transposed from p [B, 8, 3]. log_prob: the loss plus
    a weighted sum of SoftmaxCrossEntropyLoss's second output."""

    def build(m):
        B, T, C = m.batch, 8, 3
        labels = m.input("labels", TensorProto.INT64, [B, T])
        scores = m.param("scores", m.normal(B, T, C))
        if spatial:
            scores = m.op("Transpose", scores, perm=[0, 2, 1])
        else:
            scores = m.op("Reshape", scores, m.ints([-1, C]))
            labels = m.op("Reshape", labels, m.ints([-1]))
        attrs = dict(reduction=reduction)
        if ignore_index is not None:
            attrs["ignore_index"] = ignore_index
        if log_prob:
            loss, log_probs = m.op(op_type, scores, labels, n_outputs=2, **attrs)
            extra = [m.weighted_sum(log_probs, (B, C, T) if spatial else (B * T, C))]
        else:
            loss, extra = m.op(op_type, scores, labels, **attrs), []
        if reduction == "none":
            loss = m.weighted_sum(loss, (B, T) if spatial else (B * T,))
        return [loss] + extra, f"{op_type}({attrs}{', spatial' if spatial else ''})"

    return build


BUILDERS = {
    **{f"{op.lower()}{suffix}": build_binary(op, rhs)
       for op in ("Add", "Sub", "Mul", "Div")
       for suffix, rhs in (("", "same"), ("-broadcast", "broadcast"), ("-swapped", "swapped"))},
    "pow-const": build_pow(3.0),
    "pow-square-signed": build_pow(2.0, signed=True),
    "pow-cube-signed": build_pow(3.0, signed=True),
    "pow-param": build_pow("param"),
    "max": build_minmax("Max"),
    "max-broadcast": build_minmax("Max", broadcast=True),
    "min": build_minmax("Min"),
    "min-broadcast": build_minmax("Min", broadcast=True),
    **{op.lower(): build_unary(op) for op in UNARY},
    "relu-kink": build_relu_kink,
    "gelu": build_unary("Gelu", opset=20),
    "gelu-tanh": build_unary("Gelu", opset=20, approximate="tanh"),
    **{f"matmul-{k}": build_matmul(k)
       for k in ("2d", "batched", "broadcast", "vector", "vector-lhs", "matrix-lhs", "4d", "both-broadcast", "dot")},
    "gemm": build_gemm(False),
    "gemm-trans-a": build_gemm(True),
    "softmax": build_softmax("Softmax", -1),
    "softmax-axis1": build_softmax("Softmax", 1),
    "log_softmax": build_softmax("LogSoftmax", -1),
    "log_softmax-axis1": build_softmax("LogSoftmax", 1),
    **{f"{name}-keepdims{keep}": build_reduce(op, axes, keep)
       for name, op, axes in (("reduce_sum", "ReduceSum", [-1]), ("reduce_mean", "ReduceMean", [1]),
                              ("reduce_max", "ReduceMax", [2]))
       for keep in (0, 1)},
    "reduce_sum-axes01": build_reduce("ReduceSum", [0, 2], 0),
    "reduce_mean-axes12": build_reduce("ReduceMean", [1, -1], 1),
    "reduce_max-axis1": build_reduce("ReduceMax", [1], 0),
    **{f"{name}-all{keep}": build_reduce(op, None, keep)
       for name, op in (("reduce_sum", "ReduceSum"), ("reduce_mean", "ReduceMean"), ("reduce_max", "ReduceMax"))
       for keep in (0, 1)},
    **{f"attention-{v}": build_attention(v) for v in ("plain", "mul", "causal", "add", "shared")},
    "layer_norm": build_layer_norm(-1),
    "layer_norm-axis1": build_layer_norm(1),
    "layer_norm-nobias": build_layer_norm(-1, bias=False),
    "reshape": build_reshape,
    "transpose": build_transpose,
    "concat": build_concat(False),
    "concat-shared": build_concat(True),
    "slice": build_slice,
    "split": build_split,
    "pad": build_pad,
    "gather": build_gather("embedding"),
    "gather-tied": build_gather("tied"),
    "gather-axis1": build_gather("axis1"),
    "expand": build_expand,
    "trilu-upper": build_trilu(1, 1),
    "trilu-lower": build_trilu(0, -1),
    "trilu-wide": build_trilu(1, -1, (3, 5)),
    "trilu-tall": build_trilu(0, 2, (5, 3)),
    "where": build_where,
    "cast": build_cast,
    "mse": build_mse,
    "cross_entropy": build_class_loss("SoftmaxCrossEntropyLoss"),
    "cross_entropy-ignore": build_class_loss("SoftmaxCrossEntropyLoss", ignore_index=1),
    "cross_entropy-sum": build_class_loss("SoftmaxCrossEntropyLoss", reduction="sum"),
    "cross_entropy-none": build_class_loss("SoftmaxCrossEntropyLoss", reduction="none", ignore_index=2),
    "cross_entropy-spatial": build_class_loss("SoftmaxCrossEntropyLoss", spatial=True, ignore_index=0),
    "cross_entropy-spatial-none": build_class_loss("SoftmaxCrossEntropyLoss", reduction="none", spatial=True),
    "cross_entropy-log-prob": build_class_loss("SoftmaxCrossEntropyLoss", log_prob=True),
    "nll_loss": build_class_loss("NegativeLogLikelihoodLoss"),
    "nll_loss-ignore": build_class_loss("NegativeLogLikelihoodLoss", ignore_index=1),
    "nll_loss-sum": build_class_loss("NegativeLogLikelihoodLoss", reduction="sum"),
    "nll_loss-none": build_class_loss("NegativeLogLikelihoodLoss", reduction="none"),
    "nll_loss-spatial": build_class_loss("NegativeLogLikelihoodLoss", spatial=True, ignore_index=2),
}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("op", nargs="?", metavar="OP", help="the model (see --list)")
    parser.add_argument("-o", "--output", metavar="MODEL.onnx")
    parser.add_argument("--batch", type=int, default=2, help="B, the config's micro batch (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the values (default 0)")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(BUILDERS))
        return
    if args.op not in BUILDERS or not args.output:
        parser.error(f"give OP (one of {', '.join(BUILDERS)}) and -o MODEL.onnx")
    m = Model(args.batch, args.seed)
    terms, doc = BUILDERS[args.op](m)
    if terms is not None:
        m.finish(terms)
    model = m.model(doc)
    if m.opset <= onnx.defs.onnx_opset_version():
        onnx.checker.check_model(model, full_check=True)
    onnx.save_model(model, args.output)


if __name__ == "__main__":
    main(sys.argv[1:])
