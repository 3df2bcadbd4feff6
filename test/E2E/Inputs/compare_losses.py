"""Compares two training logs (`zrun --log-json`, train_torch.py --log-json):

    compare_losses.py ACTUAL.jsonl EXPECTED.jsonl [--rtol R] [--fields loss,lr]

Each file holds one JSON object per optimizer step with at least `step` and
`loss`. Both must hold the same steps. Every field of --fields (default
loss,lr) is compared at every step; `loss` is required in both files, any
other field is compared only where both files have it (and said to be
skipped otherwise). The relative error at a step is |a - e| / |e| (|a - e|
when e is 0, so that 0 must match 0). Prints, per field, the step with the
largest error, then `losses: ok`, or the first steps that exceed --rtol and
`losses: MISMATCH` (exit status 1). A NaN or infinity anywhere is a mismatch.
"""

import argparse
import json
import math
import sys


def read_log(path):
    """step -> record, in file order; raises ValueError with the line on bad input."""
    records = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON: {error}")
            if not isinstance(record, dict) or "step" not in record:
                raise ValueError(f"{path}:{number}: expected an object with a 'step'")
            step = record["step"]
            if step in records:
                raise ValueError(f"{path}:{number}: step {step} appears twice")
            records[step] = record
    if not records:
        raise ValueError(f"{path}: no steps")
    return records


def relative_error(actual, expected):
    if not (math.isfinite(actual) and math.isfinite(expected)):
        return math.inf
    difference = abs(actual - expected)
    return difference / abs(expected) if expected != 0 else difference


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("actual", help="the log under test (zrun's)")
    parser.add_argument("expected", help="the reference log (torch's)")
    parser.add_argument("--rtol", type=float, default=1e-4, help="largest relative error allowed (default 1e-4)")
    parser.add_argument("--fields", default="loss,lr", help="comma-separated fields to compare (default loss,lr)")
    parser.add_argument("--show", type=int, default=5, metavar="N", help="failing steps to list (default 5)")
    args = parser.parse_args()
    fields = [field for field in args.fields.split(",") if field]
    if "loss" not in fields:
        fields.insert(0, "loss")
    try:
        actual, expected = read_log(args.actual), read_log(args.expected)
    except (OSError, ValueError) as error:
        print(f"compare_losses.py: {error}")
        print("losses: MISMATCH")
        return 1

    ok = True
    if sorted(actual) != sorted(expected):
        only_actual = sorted(set(actual) - set(expected))
        only_expected = sorted(set(expected) - set(actual))
        print(f"the logs hold different steps: {len(actual)} in {args.actual}, {len(expected)} in {args.expected}"
              + (f"; only in actual: {only_actual[:10]}" if only_actual else "")
              + (f"; only in expected: {only_expected[:10]}" if only_expected else ""))
        ok = False
    steps = sorted(set(actual) & set(expected))

    rows = []  # (field, worst step, actual, expected, error, verdict)
    failures = []  # (step, field, actual, expected, error)
    for field in fields:
        missing_actual = [s for s in steps if field not in actual[s]]
        missing_expected = [s for s in steps if field not in expected[s]]
        if missing_actual or missing_expected:
            if field == "loss":
                where = args.actual if missing_actual else args.expected
                print(f"'loss' is missing in {where} at step {(missing_actual or missing_expected)[0]}")
                ok = False
            else:
                rows.append((field, "-", "-", "-", "-", "skipped (not in both logs)"))
            continue
        worst = None
        for step in steps:
            a, e = actual[step][field], expected[step][field]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, e)):
                failures.append((step, field, a, e, math.inf))
                continue
            error = relative_error(float(a), float(e))
            if worst is None or error > worst[4] or (math.isinf(error) and not math.isinf(worst[4])):
                worst = (step, field, float(a), float(e), error)
            if not error <= args.rtol:
                failures.append((step, field, a, e, error))
        if worst is None:
            rows.append((field, "-", "-", "-", "inf", "MISMATCH (not numbers)"))
            continue
        verdict = "ok" if worst[4] <= args.rtol else "MISMATCH"
        rows.append((field, str(worst[0]), f"{worst[2]:.8g}", f"{worst[3]:.8g}", f"{worst[4]:.3g}", verdict))

    print(f"{len(steps)} steps, rtol {args.rtol:g}; worst step per field (actual {args.actual}, "
          f"expected {args.expected}):")
    header = ("field", "step", "actual", "expected", "rel error", "verdict")
    widths = [max(len(str(row[i])) for row in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
    if failures:
        ok = False
        failures.sort(key=lambda failure: (failure[0], fields.index(failure[1])))
        print(f"{len(failures)} value(s) beyond rtol {args.rtol:g}; the first:")
        for step, field, a, e, error in failures[:args.show]:
            print(f"  step {step} {field}: actual {a!r}, expected {e!r}, rel error {error:.3g}")
    print(f"losses: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
