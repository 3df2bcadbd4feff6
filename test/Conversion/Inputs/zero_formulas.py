"""Checks `zcc --report=json` model-state bytes against ZeRO's formulas.

  zero_formulas.py MODEL.onnx REPORT.json --stage S --ranks N

Psi is the model's parameter count (its initializers). zcc keeps fp32
parameters and fp32 gradient accumulators (16-bit copies, under mixed
precision, are transient activations) and Adam's two moments, plus, in stages
1 and 2, an fp32 master copy of each rank's rows; so, per rank (bytes):

  stage 0: parameters 4 Psi,   gradients 4 Psi,   optimizer state 8 Psi
  stage 1: parameters 4 Psi,   gradients 4 Psi,   optimizer state 12 Psi / N
  stage 2: parameters 4 Psi,   gradients 4 Psi/N, optimizer state 12 Psi / N
  stage 3: parameters 4 Psi/N, gradients 4 Psi/N, optimizer state 8 Psi / N

the ZeRO paper's (2 + 2 + K) Psi split as each stage says, with 4-byte
parameters and gradients. Prints each category with `ok` or `MISMATCH`."""

import argparse
import json
import math

import onnx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("report")
    parser.add_argument("--stage", type=int, required=True)
    parser.add_argument("--ranks", type=int, required=True)
    args = parser.parse_args()
    model = onnx.load(args.model, load_external_data=False)
    psi = sum(math.prod(t.dims) for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    n, s = args.ranks, args.stage
    expected = {
        "parameters": 4 * psi // (n if s == 3 else 1),
        "gradients": 4 * psi // (n if s >= 2 else 1),
        "optimizer_state": 8 * psi if s == 0 else (12 * psi // n if s in (1, 2) else 8 * psi // n),
    }
    for rank in json.load(open(args.report))["ranks"]:
        got = rank["peak_device_bytes"]
        for key, want in expected.items():
            verdict = "ok" if got[key] == want else f"MISMATCH (expected {want})"
            print(f"stage {s} rank {rank['rank']} of {n}: {key} {got[key]} = {want / psi:g} Psi: {verdict}")


if __name__ == "__main__":
    main()
