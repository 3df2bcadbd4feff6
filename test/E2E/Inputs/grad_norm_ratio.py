"""The first step's gradient norm of a run (argv[1]) against another's
(argv[2]): their ratio must be argv[3] within 1e-6."""

import json
import sys

summed = json.loads(open(sys.argv[1]).readline())["grad_norm"]
averaged = json.loads(open(sys.argv[2]).readline())["grad_norm"]
expected = float(sys.argv[3])
ratio = summed / averaged
status = "ok" if abs(ratio - expected) <= 1e-6 * expected else f"FAILED ({ratio} != {expected})"
print(f"gradient norm ratio: {status}: {summed} / {averaged} = {ratio}")
