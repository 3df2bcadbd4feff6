"""Writes a folder of .npy arrays as one safetensors file:

    npy_to_safetensors.py DIR OUT.safetensors [--cast DTYPE]

each DIR/<name>.npy becomes tensor <name>. The format is written by hand
(json and struct) because the tests' Python has no safetensors package: an
8-byte little-endian header size, a JSON header {name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}} padded with spaces to
a multiple of 8, then the little-endian data, offsets counted from the end
of the header. --cast converts every array first (to test zrun's dtype
check).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

DTYPES = {
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("float64"): "F64",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int8"): "I8",
    np.dtype("bool"): "BOOL",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("output")
    parser.add_argument("--cast", help="numpy dtype to convert every array to")
    args = parser.parse_args()
    header = {"__metadata__": {"format": "pt"}}
    chunks = []
    offset = 0
    for file in sorted(os.listdir(args.dir)):
        if not file.endswith(".npy"):
            continue
        array = np.load(os.path.join(args.dir, file))
        if args.cast:
            array = array.astype(args.cast)
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[file[: -len(".npy")]] = {
            "dtype": DTYPES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(args.output, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for data in chunks:
            out.write(data)
    print(f"wrote {args.output}: {len(header) - 1} tensors, {offset} bytes of data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
