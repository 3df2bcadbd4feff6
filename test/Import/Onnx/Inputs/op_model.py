"""Writes a tiny ONNX model from a compact spec, for the importer's lit tests.

  op_model.py -o OUT.onnx [--opset N] [--ir-version V] [--no-check]
      --input NAME:TYPE:SHAPE ...       graph inputs
      --init NAME:TYPE:SHAPE=VALUE ...  initializers
      --const NAME:TYPE:SHAPE=VALUE ... Constant nodes (as exporters write them)
      --node 'Op(a, b) -> c {attr=value, ...}' [--name NODE_NAME] ...
      --output NAME[:TYPE:SHAPE] ...    graph outputs (type and shape inferred
                                        by ONNX when not given)

TYPE is f32 f16 bf16 f64 i64 i32 i8 u8 bool c64. SHAPE is `2x3` (empty for a
scalar, `*` for no shape at all); a dimension that is not a number is dynamic:
named (`batchx3`, or `seq x 3` when a name holds an x) or unnamed (`?`).
VALUE is `random`, `zeros`, `ones`, `tril` (ones on and below the diagonal of
the last two dimensions), `arange`, or a Python literal such as `[3,4]`,
`-3.4e38` or `[1,nan,-inf]`, reshaped to SHAPE.
A node's op may be qualified by a domain (`com.microsoft.FusedMatMul`); an
empty optional input or output is '' (`Slice(x, s, e, '', st) -> y`).
Attribute values are Python literals (ints, floats, strings, lists) or
`tensor(TYPE:SHAPE=VALUE)`. Nodes are named `/Op_K` (the K-th node of that
op) unless `--name` follows them.

The model is checked with onnx.checker unless --no-check is given or the
opset is newer than the installed onnx knows. --ir-version defaults to the one
ONNX pairs with the opset. For error tests:
  --opset 0                  import no opset of the default domain
  --truncate-raw NAME=BYTES  keep only BYTES bytes of an initializer's raw data
  --external-data FILE       save initializers in FILE, next to the model
"""

import argparse
import ast
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TYPES = {
    "f32": (TensorProto.FLOAT, np.float32),
    "f16": (TensorProto.FLOAT16, np.float16),
    "bf16": (TensorProto.BFLOAT16, np.float32),
    "f64": (TensorProto.DOUBLE, np.float64),
    "i64": (TensorProto.INT64, np.int64),
    "i32": (TensorProto.INT32, np.int32),
    "i8": (TensorProto.INT8, np.int8),
    "u8": (TensorProto.UINT8, np.uint8),
    "bool": (TensorProto.BOOL, np.bool_),
    "c64": (TensorProto.COMPLEX64, np.complex64),
}
# The IR version that ONNX pairs with each opset (ONNX's Versioning.md).
IR_FOR_OPSET = {19: 9, 20: 9, 21: 10, 22: 10}


def parse_shape(text):
    """`2x3` -> [2, 3]; names and `?` stay strings (dynamic dimensions)."""
    text = text.strip()
    if not text:
        return []
    parts = re.split(r"\s+x\s+", text) if re.search(r"\s", text) else text.split("x")
    return [int(p) if re.fullmatch(r"\d+", p) else p for p in parts]


def parse_typed(spec):
    """`NAME:TYPE:SHAPE` -> (name, type key, shape)."""
    name, type_key, shape = (spec.split(":", 2) + ["", ""])[:3]
    if type_key not in TYPES:
        sys.exit(f"op_model.py: unknown type '{type_key}' in '{spec}'")
    return name, type_key, parse_shape(shape)


def make_array(type_key, shape, value, rng):
    dtype = TYPES[type_key][1]
    value = value.strip()
    if value == "random":
        array = rng.standard_normal(shape) if dtype != np.bool_ else rng.random(shape) < 0.5
    elif value in ("zeros", "ones"):
        array = np.zeros(shape) if value == "zeros" else np.ones(shape)
    elif value == "tril":
        array = np.tril(np.ones(shape[-2:]))
        array = np.broadcast_to(array, shape)
    elif value == "arange":
        array = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    else:
        # nan and inf become strings that numpy reads back as floats.
        special = re.search(r"\b(nan|inf)\b", value)
        literal = ast.literal_eval(re.sub(r"(-?\b(?:nan|inf)\b)", r"'\1'", value))
        array = np.array(literal, dtype=np.float64 if special else None).reshape(shape)
    return np.array(array, dtype=dtype, order="C")


def make_tensor(spec, rng):
    """`NAME:TYPE:SHAPE=VALUE` -> TensorProto."""
    typed, _, value = spec.partition("=")
    name, type_key, shape = parse_typed(typed)
    array = make_array(type_key, shape, value, rng)
    if type_key == "bf16":
        # numpy has no bfloat16: keep the high half of each float32.
        bits = (array.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return helper.make_tensor(name, TensorProto.BFLOAT16, shape, bits.tobytes(), raw=True)
    return numpy_helper.from_array(array, name)


def split_top_level(text):
    """Splits at commas outside brackets, parentheses and quotes."""
    parts, depth, quote, current = [], 0, None, ""
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def parse_attribute(item, rng):
    name, _, value = item.partition("=")
    name, value = name.strip(), value.strip()
    if value.startswith("tensor(") and value.endswith(")"):
        return helper.make_attribute(name, make_tensor("value:" + value[7:-1], rng))
    parsed = ast.literal_eval(value)
    if isinstance(parsed, list) and not parsed:
        return helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS)
    return helper.make_attribute(name, parsed)


NODE = re.compile(r"^\s*([\w.]+)\s*\((.*)\)\s*->\s*([^{]*?)\s*(?:\{(.*)\})?\s*$")


def names(text):
    return [n.strip().strip("'\"") for n in split_top_level(text)] if text.strip() else []


def make_node(spec, rng):
    match = NODE.match(spec)
    if not match:
        sys.exit(f"op_model.py: cannot parse node '{spec}'")
    op, inputs, outputs, attrs = match.groups()
    domain, _, op = op.rpartition(".")
    node = helper.make_node(op, names(inputs), names(outputs), domain=domain)
    node.attribute.extend(parse_attribute(a, rng) for a in split_top_level(attrs or ""))
    return node


def value_info(spec):
    name, type_key, shape = parse_typed(spec)
    if shape == ["*"]:
        return helper.make_tensor_value_info(name, TYPES[type_key][0], None)
    shape = [None if d == "?" else d for d in shape]
    return helper.make_tensor_value_info(name, TYPES[type_key][0], shape)


class NodeAction(argparse.Action):
    """Keeps --node and --name in command-line order."""

    def __call__(self, parser, namespace, value, option):
        nodes = getattr(namespace, "nodes")
        if option == "--name":
            if not nodes:
                parser.error("--name must follow a --node")
            nodes[-1][1] = value
        else:
            nodes.append([value, None])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", required=True)
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--ir-version", type=int)
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--init", action="append", default=[])
    parser.add_argument("--const", action="append", default=[])
    parser.add_argument("--node", "--name", dest="nodes", action=NodeAction, default=[])
    parser.add_argument("--output", action="append", default=[])
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--truncate-raw", action="append", default=[])
    parser.add_argument("--external-data")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    counts = {}

    def auto_name(op):
        count = counts.get(op, 0)
        counts[op] = count + 1
        return f"/{op}_{count}"

    nodes = []
    for spec in args.const:
        tensor = make_tensor(spec, rng)
        nodes.append(helper.make_node("Constant", [], [tensor.name], name=auto_name("Constant"),
                                      value=tensor))
    for spec, name in args.nodes:
        node = make_node(spec, rng)
        node.name = auto_name(node.op_type) if name is None else name
        nodes.append(node)

    initializers = [make_tensor(spec, rng) for spec in args.init]
    for spec in args.truncate_raw:
        name, _, size = spec.partition("=")
        tensor = next(t for t in initializers if t.name == name)
        tensor.raw_data = tensor.raw_data[: int(size)]

    outputs = [value_info(o) if ":" in o else onnx.ValueInfoProto(name=o) for o in args.output]
    graph = helper.make_graph(nodes, "op_model", [value_info(i) for i in args.input], outputs,
                              initializer=initializers)
    opsets = [helper.make_opsetid("", args.opset)] if args.opset else []
    opsets += [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in nodes} - {""})]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="op_model.py")
    model.ir_version = IR_FOR_OPSET.get(args.opset, 8)
    if args.ir_version is not None:
        model.ir_version = args.ir_version
    checkable = 0 < args.opset <= onnx.defs.onnx_opset_version()

    # Outputs given by name take the type and shape ONNX infers for them.
    untyped = [o for o in model.graph.output if not o.HasField("type")]
    if untyped and checkable:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        known = {v.name: v.type for v in [*inferred.graph.output, *inferred.graph.value_info,
                                          *inferred.graph.input] if v.type.WhichOneof("value")}
        for output in untyped:
            if output.name in known:
                output.type.CopyFrom(known[output.name])

    if checkable and not args.no_check:
        onnx.checker.check_model(model)
    if args.external_data:
        onnx.save_model(model, args.out, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=args.external_data,
                        size_threshold=0)
    else:
        onnx.save_model(model, args.out)


if __name__ == "__main__":
    main()
