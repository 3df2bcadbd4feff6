"""Summarises the parameters of a zgraph module read from standard input:

    params: <tensors> tensors, <elements> elements, trainable <elements>
    param <name> <shape>          (one line each, with --list)

so a lit test can compare an import against the parameter count and shapes
the model's producer reported.
"""

import argparse
import re
import sys

PARAM = re.compile(r'zgraph\.param "([^"]+)"( trainable)?.*: tensor<([0-9x]*)x?[a-z]+[0-9]*>')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true", help="print every parameter")
    args = parser.parse_args()
    tensors = elements = trainable = 0
    lines = []
    for line in sys.stdin:
        match = PARAM.search(line)
        if not match:
            continue
        name, is_trainable, dims = match.groups()
        count = 1
        shape = [int(d) for d in dims.split("x") if d]
        for d in shape:
            count *= d
        tensors += 1
        elements += count
        trainable += count if is_trainable else 0
        lines.append(f"param {name} {'x'.join(map(str, shape)) or 'scalar'}")
    print(f"params: {tensors} tensors, {elements} elements, trainable {trainable}")
    if args.list:
        print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main()
