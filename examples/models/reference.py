#!/usr/bin/python3
"""Evaluate this directory's ONNX models with plain numpy, as a test oracle.

Supports exactly the ops that make_models.py and export_torch.py emit, at
opsets 13 to 18, and fails on any other. Floating-point tensors are evaluated
in float64 and outputs are stored in their declared type, so the result is a
reference for float32 runtimes rather than one more float32 run.

  reference.py MODEL.onnx --inputs DIR [--weights DIR] [--output-dir DIR] [--compare DIR]

reads each graph input from DIR/<input name>.npy (the layout of
export_torch.py --save-reference), optionally replaces initializers by
DIR/<name>.npy, and writes or compares DIR/<output name>.npy.
"""

import argparse
import glob
import math
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPS = {}


def op(*op_types):
    def register(fn):
        for op_type in op_types:
            OPS[op_type] = fn
        return fn
    return register


def widen(array):
    """float64 for floating-point arrays; others unchanged."""
    return array.astype(np.float64) if np.issubdtype(array.dtype, np.floating) else array


BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}
UNARY = {"Sqrt": np.sqrt, "Relu": lambda x: np.maximum(x, 0), "Erf": np.frompyfunc(math.erf, 1, 1)}


@op(*BINARY)
def binary(node, attrs, a, b):
    return BINARY[node.op_type](a, b)


@op(*UNARY)
def unary(node, attrs, x):
    return UNARY[node.op_type](x).astype(x.dtype)


@op("Constant")
def constant(node, attrs):
    return widen(numpy_helper.to_array(attrs["value"]))


@op("Identity")
def identity(node, attrs, x):
    return x


@op("MatMul")
def matmul(node, attrs, a, b):
    return np.matmul(a, b)


@op("Gemm")
def gemm(node, attrs, a, b, c=None):
    a = a.T if attrs.get("transA", 0) else a
    b = b.T if attrs.get("transB", 0) else b
    y = attrs.get("alpha", 1.0) * (a @ b)
    return y if c is None else y + attrs.get("beta", 1.0) * c


@op("Gather")
def gather(node, attrs, data, indices):
    return np.take(data, indices, axis=attrs.get("axis", 0))


@op("Transpose")
def transpose(node, attrs, x):
    return np.transpose(x, attrs.get("perm"))


@op("Reshape")
def reshape(node, attrs, x, shape):
    if attrs.get("allowzero", 0):
        raise NotImplementedError("Reshape with allowzero=1")
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


@op("Split")
def split(node, attrs, x, sizes=None):
    axis = attrs.get("axis", 0)
    if sizes is None:  # equal parts: num_outputs (opset 18) or the number of outputs
        sizes = [x.shape[axis] // len(node.output)] * len(node.output)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@op("Where")
def where(node, attrs, condition, x, y):
    return np.where(condition, x, y)


@op("Softmax")
def softmax(node, attrs, x):
    axis = attrs.get("axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@op("ReduceMean")
def reduce_mean(node, attrs, x, axes=None):
    axes = attrs.get("axes", axes)  # an attribute before opset 18, an input from 18
    if axes is None or len(axes) == 0:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = None
    else:
        axes = tuple(int(a) for a in axes)
    return np.mean(x, axis=axes, keepdims=bool(attrs.get("keepdims", 1)))


@op("LayerNormalization")
def layer_norm(node, attrs, x, scale, bias=None):
    if len(node.output) > 1:
        raise NotImplementedError("LayerNormalization with Mean or InvStdDev outputs")
    axes = tuple(range(attrs.get("axis", -1) % x.ndim, x.ndim))
    centered = x - x.mean(axis=axes, keepdims=True)
    variance = (centered**2).mean(axis=axes, keepdims=True)
    y = centered / np.sqrt(variance + attrs.get("epsilon", 1e-5)) * scale
    return y if bias is None else y + bias


@op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(node, attrs, scores, labels, weights=None):
    if weights is not None or len(node.output) > 1:
        raise NotImplementedError("SoftmaxCrossEntropyLoss with weights or log_prob output")
    shifted = scores - scores.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    ignore_index = attrs.get("ignore_index")
    valid = np.ones(labels.shape, bool) if ignore_index is None else labels != ignore_index
    picked = np.take_along_axis(log_prob, np.expand_dims(np.where(valid, labels, 0), 1), axis=1)
    losses = -np.squeeze(picked, 1) * valid
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / valid.sum()


def numpy_dtype(elem_type):
    if hasattr(helper, "tensor_dtype_to_np_dtype"):  # onnx >= 1.13
        return helper.tensor_dtype_to_np_dtype(elem_type)
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]


def run(model, feeds):
    """Evaluates the graph on feeds (name -> array); returns {output name: array}."""
    for declared in model.graph.input:
        tensor_type = declared.type.tensor_type
        shape = np.shape(feeds[declared.name])
        dims = [d.dim_value or None for d in tensor_type.shape.dim]  # None: symbolic
        if len(shape) != len(dims) or any(d is not None and d != n for d, n in zip(dims, shape)):
            raise ValueError(f"input {declared.name}: shape {shape}, but the graph declares {dims}")
        if np.asarray(feeds[declared.name]).dtype != numpy_dtype(tensor_type.elem_type):
            raise ValueError(f"input {declared.name}: dtype {np.asarray(feeds[declared.name]).dtype}, "
                             f"but the graph declares {numpy_dtype(tensor_type.elem_type)}")
    env = {t.name: widen(numpy_helper.to_array(t)) for t in model.graph.initializer}
    env.update({name: widen(np.asarray(value)) for name, value in feeds.items()})
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in OPS:
            raise NotImplementedError(f"{node.name}: op {node.domain or 'ai.onnx'}.{node.op_type} is not supported")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        args = [env[name] if name else None for name in node.input]
        results = OPS[node.op_type](node, attrs, *args)
        if len(node.output) == 1:
            results = [results]
        for name, value in zip(node.output, results):
            env[name] = np.asarray(value)
    return {o.name: env[o.name].astype(numpy_dtype(o.type.tensor_type.elem_type)) for o in model.graph.output}


def load_npy(path):
    if not os.path.isfile(path):
        raise SystemExit(f"reference.py: error: {path}: no such file")
    return np.load(path)


def replace_weights(model, directory):
    """Replaces initializers by DIR/<name>.npy; every file must name one, of the same shape."""
    by_name = {t.name: t for t in model.graph.initializer}
    files = sorted(glob.glob(os.path.join(directory, "*.npy")))
    for path in files:
        name = os.path.basename(path)[: -len(".npy")]
        array = load_npy(path)
        if name not in by_name:
            raise SystemExit(f"reference.py: error: {path}: the model has no initializer {name}")
        if tuple(by_name[name].dims) != array.shape:
            raise SystemExit(f"reference.py: error: {path}: shape {array.shape}, "
                             f"but initializer {name} is {tuple(by_name[name].dims)}")
        by_name[name].CopyFrom(numpy_helper.from_array(array, name))
    print(f"replaced {len(files)} of {len(by_name)} initializers from {directory}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", metavar="MODEL.onnx")
    parser.add_argument("--inputs", required=True, metavar="DIR", help="read input X from DIR/X.npy")
    parser.add_argument("--weights", metavar="DIR", help="replace initializer W by DIR/W.npy")
    parser.add_argument("--output-dir", metavar="DIR", help="write output Y to DIR/Y.npy")
    parser.add_argument("--compare", metavar="DIR", help="compare output Y with DIR/Y.npy; exit 1 if they differ")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance of --compare (default 1e-5)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance of --compare (default 1e-5)")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    model = onnx.load(args.model)
    if args.weights:
        replace_weights(model, args.weights)
    feeds = {i.name: load_npy(os.path.join(args.inputs, f"{i.name}.npy")) for i in model.graph.input}
    try:
        outputs = run(model, feeds)
    except (ValueError, NotImplementedError) as error:
        raise SystemExit(f"reference.py: error: {error}")
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        for name, value in outputs.items():
            np.save(os.path.join(args.output_dir, f"{name}.npy"), value)
    failed = False
    for name, value in outputs.items():
        line = f"{name}: shape {value.shape}"
        if args.compare:
            expected = load_npy(os.path.join(args.compare, f"{name}.npy"))
            close = expected.shape == value.shape and np.allclose(value, expected, rtol=args.rtol, atol=args.atol)
            diff = np.abs(value.astype(np.float64) - expected).max() if expected.shape == value.shape else math.inf
            line += f", max |diff| {diff:.3g} vs {args.compare}: {'ok' if close else 'MISMATCH'}"
            failed |= not close
        print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
