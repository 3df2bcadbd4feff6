"""Prints a DeepSpeed config: BASE.json with zero_optimization keys set from
KEY=VALUE arguments (VALUE parsed as JSON), for tests that vary one knob."""

import json
import sys

config = json.load(open(sys.argv[1]))
for item in sys.argv[2:]:
    key, value = item.split("=", 1)
    config.setdefault("zero_optimization", {})[key] = json.loads(value)
print(json.dumps(config, indent=1))
