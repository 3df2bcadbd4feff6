"""Writes a copy of a DeepSpeed config with its optimizer replaced by Lion:

    use_lion.py IN.json OUT.json [--lr LR] [--weight-decay WD] [--offload] [--offload-param]

--offload also puts the optimizer in host memory (offload_optimizer cpu),
--offload-param the parameters too (offload_param cpu, ZeRO-3).
"""

import argparse
import json

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--offload", action="store_true")
parser.add_argument("--offload-param", action="store_true")
args = parser.parse_args()
config = json.load(open(args.input))
config["optimizer"] = {"type": "Lion", "params": {"lr": args.lr, "betas": [0.9, 0.99],
                                                  "weight_decay": args.weight_decay}}
if "scheduler" in config and "warmup_max_lr" in config["scheduler"].get("params", {}):
    config["scheduler"]["params"]["warmup_max_lr"] = args.lr
if args.offload:
    config.setdefault("zero_optimization", {"stage": 2})["offload_optimizer"] = {"device": "cpu"}
if args.offload_param:
    config["zero_optimization"]["offload_param"] = {"device": "cpu"}
json.dump(config, open(args.output, "w"), indent=1)
