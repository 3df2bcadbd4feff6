"""Compares zplan export's two outputs with each other and with the model:

    check_export.py WEIGHTS.safetensors TRAINED.onnx ORIGINAL.onnx

Reads the safetensors file by its format (an 8-byte little-endian header
length, a JSON header, the data), the trained ONNX model's initializers, and
the original model's. Prints how many tensors the safetensors file holds, how
many of them equal the trained model's initializer of the same name, how many
differ from the original's, and runs onnx.checker on the trained model.
"""

import json
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    """name -> array, in the file's order (the metadata left out)."""
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[base + begin:base + end],
                                      dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def main(weights, trained, original):
    trained_model = onnx.load(trained)
    trained_values = {t.name: numpy_helper.to_array(t) for t in trained_model.graph.initializer}
    original_values = {t.name: numpy_helper.to_array(t)
                       for t in onnx.load(original).graph.initializer}
    count = equal = changed = 0
    for name, value in read_safetensors(weights).items():
        count += 1
        equal += bool(np.array_equal(value, trained_values[name]))
        changed += not np.array_equal(value, original_values[name])
    print(f"{count} tensors, equal in both exports: {equal}, changed by training: {changed}")
    onnx.checker.check_model(trained_model)
    print("onnx.checker: ok")


if __name__ == "__main__":
    main(*sys.argv[1:])
