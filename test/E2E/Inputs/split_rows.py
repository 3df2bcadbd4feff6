"""Token ids for inference, whole and in micro-batches:

    split_rows.py --rows 8 --cols 32 --vocab 128 --part 2 --seed 1 -o PREFIX

writes PREFIX.npy (rows x cols int64) and PREFIX_<k>.npy, its k-th block of
`part` rows, so a one-rank plan can run each micro-batch a pipeline runs.
"""
import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, required=True)
parser.add_argument("--cols", type=int, required=True)
parser.add_argument("--vocab", type=int, required=True)
parser.add_argument("--part", type=int, required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("-o", "--output", required=True)
args = parser.parse_args()
x = np.random.default_rng(args.seed).integers(0, args.vocab, size=(args.rows, args.cols)).astype(np.int64)
np.save(args.output + ".npy", x)
for k in range(args.rows // args.part):
    np.save(f"{args.output}_{k}.npy", x[k * args.part:(k + 1) * args.part])
