"""Writes a copy of a DeepSpeed config with keys set or removed:

    set_config.py IN OUT key=JSON ... -key ...

A dotted key reaches into sections (bf16.check_grad_overflow=false)."""

import json
import sys


def main():
    source, target, *edits = sys.argv[1:]
    config = json.load(open(source))
    for edit in edits:
        remove = edit.startswith("-")
        path, _, value = edit.lstrip("-").partition("=")
        *sections, key = path.split(".")
        node = config
        for section in sections:
            node = node.setdefault(section, {})
        if remove:
            node.pop(key, None)
        else:
            node[key] = json.loads(value)
    json.dump(config, open(target, "w"), indent=2)


if __name__ == "__main__":
    main()
