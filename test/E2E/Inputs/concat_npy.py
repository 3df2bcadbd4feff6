"""Concatenates arrays along their first axis:

    concat_npy.py -o OUT.npy A.npy B.npy ...
"""
import sys

import numpy as np

out = sys.argv[sys.argv.index("-o") + 1]
files = [f for i, f in enumerate(sys.argv[1:], 1) if sys.argv[i - 1] != "-o" and f != "-o"]
np.save(out, np.concatenate([np.load(f) for f in files]))
