"""Writes a stack of identical layers (MatMul by a width x width weight, then
Relu) as an ONNX model: a pipeline of it has stages of equal cost.

    make_stack.py --layers 4 --width 16 --batch 4 -o stack.onnx
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    nodes, weights = [], []
    x = "x"
    for i in range(args.layers):
        w = f"layers.{i}.weight"
        weights.append(numpy_helper.from_array(
            (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32), w))
        nodes.append(helper.make_node("MatMul", [x, w], [f"h{i}"], name=f"/layers.{i}/MatMul"))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"a{i}"], name=f"/layers.{i}/Relu"))
        x = f"a{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="/output"))
    graph = helper.make_graph(
        nodes, "stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [args.batch, args.width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [args.batch, args.width])],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, args.output)


if __name__ == "__main__":
    main()
