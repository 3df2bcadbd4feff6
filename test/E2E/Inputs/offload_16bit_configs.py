"""Writes the configs of train-offload-16bit-gradients.test into OUT:
{off,dev}-{bf16,fp16}.json from BASE (ZeRO-2), one micro-step per optimizer
step on one rank, with (off) and without (dev) offload_optimizer."""

import json
import sys

base, out = sys.argv[1], sys.argv[2]
config = json.load(open(base))
config["gradient_accumulation_steps"] = 1
config["train_batch_size"] = config["train_micro_batch_size_per_gpu"]
for precision in ("bf16", "fp16"):
    for offload in (True, False):
        c = json.loads(json.dumps(config))
        if precision == "bf16":
            c["bf16"] = {"enabled": True}
        else:
            c["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 12,
                         "hysteresis": 2, "min_loss_scale": 1}
        if offload:
            c["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
        name = ("off" if offload else "dev") + "-" + precision
        json.dump(c, open(f"{out}/{name}.json", "w"), indent=1)
