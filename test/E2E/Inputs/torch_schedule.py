"""torch.optim.lr_scheduler's schedules, as DeepSpeed runs them, against zrun's:

    torch_schedule.py use IN.json OUT.json TYPE PARAMS_JSON
        writes IN.json with its scheduler replaced by {"type": TYPE,
        "params": PARAMS_JSON}
    torch_schedule.py check CONFIG.json ZRUN.jsonl
        builds the scheduler as DeepSpeed's engine does for a name it does
        not define (getattr(torch.optim.lr_scheduler, TYPE)(optimizer,
        **params)), steps it after each optimizer step, and compares the lr
        of every step zrun logged with torch's, bit for bit

Prints one line: the steps compared and the lr's range, or the first step
that differs (exit status 1).
"""

import json
import sys

import torch

if sys.argv[1] == "use":
    _, _, source, target, kind, params = sys.argv
    config = json.load(open(source))
    config["scheduler"] = {"type": kind, "params": json.loads(params)}
    json.dump(config, open(target, "w"), indent=2)
    sys.exit(0)

_, _, config_path, log_path = sys.argv
config = json.load(open(config_path))
section = config["scheduler"]
steps = [json.loads(line) for line in open(log_path)]
weight = torch.nn.Parameter(torch.zeros(1))
optimizer = torch.optim.AdamW([weight], lr=config["optimizer"]["params"]["lr"])
scheduler = getattr(torch.optim.lr_scheduler, section["type"])(optimizer, **section.get("params", {}))
expected = []
for _ in steps:
    expected.append(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
for step, lr in zip(steps, expected):
    if step["lr"] != lr:
        print(f"{section['type']}: step {step['step']}: zrun's lr {step['lr']!r}, torch's {lr!r}")
        sys.exit(1)
print(f"{section['type']}: {len(steps)} steps, every lr torch's bit for bit "
      f"(from {min(expected):.6g} to {max(expected):.6g}, {len(set(expected))} values)")
