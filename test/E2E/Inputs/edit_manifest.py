"""Copies a checkpoint folder and sets one value of its newest manifest, as
another program (or a hand edit) might:

    edit_manifest.py SOURCE TARGET key=JSON

A dotted key reaches into objects and lists (buffers.0.parts=129)."""

import json
import os
import shutil
import sys


def main():
    source, target, edit = sys.argv[1:]
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    step = open(os.path.join(target, "latest")).read().strip()
    path = os.path.join(target, step, "manifest.json")
    manifest = json.load(open(path))
    keys, _, value = edit.partition("=")
    *parents, key = keys.split(".")
    node = manifest
    for parent in parents:
        node = node[int(parent)] if isinstance(node, list) else node[parent]
    if isinstance(node, list):
        key = int(key)
    node[key] = json.loads(value)
    json.dump(manifest, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()
