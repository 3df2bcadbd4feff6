"""Writes a copy of a DeepSpeed config with its optimizer replaced:

    use_optimizer.py IN.json OUT.json [--type lion|adagrad|lamb|adamw] [--lr LR]
                     [--weight-decay WD] [--lr-decay D] [--offload] [--offload-param]

Lion (the default) gets betas 0.9/0.99, Adagrad its defaults (eps 1e-10)
and --lr-decay, Lamb and AdamW their defaults (set_config.py sets more). A
WarmupLR's warmup_max_lr follows --lr. --offload also puts the optimizer in
host memory (offload_optimizer cpu), --offload-param the parameters too
(offload_param cpu, ZeRO-3).
"""

import argparse
import json

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--type", choices=["lion", "adagrad", "lamb", "adamw"], default="lion")
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--lr-decay", type=float, default=0.0)
parser.add_argument("--offload", action="store_true")
parser.add_argument("--offload-param", action="store_true")
args = parser.parse_args()
config = json.load(open(args.input))
params = {"lr": args.lr, "weight_decay": args.weight_decay}
if args.type == "lion":
    config["optimizer"] = {"type": "Lion", "params": {**params, "betas": [0.9, 0.99]}}
elif args.type == "adagrad":
    config["optimizer"] = {"type": "Adagrad", "params": {**params, "lr_decay": args.lr_decay}}
else:
    config["optimizer"] = {"type": {"lamb": "Lamb", "adamw": "AdamW"}[args.type], "params": params}
if "scheduler" in config and "warmup_max_lr" in config["scheduler"].get("params", {}):
    config["scheduler"]["params"]["warmup_max_lr"] = args.lr
if args.offload:
    config.setdefault("zero_optimization", {"stage": 2})["offload_optimizer"] = {"device": "cpu"}
if args.offload_param:
    config["zero_optimization"]["offload_param"] = {"device": "cpu"}
json.dump(config, open(args.output, "w"), indent=1)
