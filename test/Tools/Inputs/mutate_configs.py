"""Feeds zcc many broken variants of the example configs and checks that each
run ends with exit status 0 or 1 and, when it fails, exactly one error line:
never a crash, a hang, or an error without a message.

usage: mutate_configs.py ZCC CONFIG.json... --cases N --seed S
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile

VALUES = [None, True, False, 0, -1, 1, 2, 3, 1.5, 1e308, -1e308, 2**63, -(2**63) - 1,
          "", "auto", "cpu", "nvme", "x" * 300, [], [1, 2], {}, {"enabled": True},
          {"device": "cpu"}, {"type": "AdamW"}]


def mutate_tree(tree, rng):
    """Replaces, deletes or adds one member somewhere in the tree."""
    path = []
    node = tree
    while isinstance(node, dict) and node and rng.random() < 0.7:
        key = rng.choice(list(node))
        if not isinstance(node[key], dict):
            break
        path.append(key)
        node = node[key]
    if not isinstance(node, dict):
        return
    action = rng.random()
    if node and action < 0.45:
        node[rng.choice(list(node))] = rng.choice(VALUES)
    elif node and action < 0.6:
        del node[rng.choice(list(node))]
    else:
        known = ["stage", "enabled", "type", "params", "device", "lr", "num_stages",
                 "train_batch_size", "overlap_comm", "overlap_reduce", "cpu_offload",
                 "stage_id", "bogus_key", "hysteresis", "micro_batches"]
        node[rng.choice(known)] = rng.choice(VALUES)


def mutate_text(text, rng):
    """Breaks the JSON text itself: deletes, duplicates or inserts characters."""
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(chars) + 1)
        action = rng.random()
        if action < 0.4 and i < len(chars):
            del chars[i]
        elif action < 0.7:
            chars.insert(i, rng.choice(['"', "{", "}", "[", "]", ",", ":", "\\", "\x00",
                                        "\xff", "1e", "-", " "]))
        else:
            chars = chars[:i]
    return "".join(chars)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("zcc")
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sources = [open(path).read() for path in args.configs]
    failures = 0
    counts = {0: 0, 1: 0}
    with tempfile.NamedTemporaryFile("w+", suffix=".json") as handle:
        for case in range(args.cases):
            source = rng.choice(sources)
            if rng.random() < 0.5:
                tree = json.loads(source)
                for _ in range(rng.randint(1, 3)):
                    mutate_tree(tree, rng)
                text = json.dumps(tree, indent=2)
            else:
                text = mutate_text(source, rng)
            handle.seek(0)
            handle.truncate()
            handle.write(text)
            handle.flush()
            world = rng.choice(["1", "2", "3", "4", "8"])
            try:
                run = subprocess.run([args.zcc, "--emit", "config", "-c", handle.name,
                                      "--world-size", world],
                                     capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                print(f"case {case}: zcc hung on:\n{text}")
                failures += 1
                continue
            stderr = run.stderr.decode("utf-8", "replace")
            errors = [line for line in stderr.splitlines() if ": error: " in line]
            ok = (run.returncode == 0 and not errors) or (run.returncode == 1 and len(errors) == 1)
            if not ok:
                failures += 1
                print(f"case {case}: exit {run.returncode}, {len(errors)} error lines, "
                      f"world size {world}\n--- input\n{text}\n--- stderr\n{stderr}")
            else:
                counts[run.returncode] += 1
    print(f"accepted {counts[0]}, rejected {counts[1]}, bad {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
