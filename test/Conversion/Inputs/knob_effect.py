"""Compares two ZeRO-3 compilations that differ in one knob: the planned
peak (the arena of rank 0, from `zcc --report=json`), the all-gather bytes
per step and the number of all-gather ops (`zcc --emit dist`).

  knob_effect.py NAME LOW HIGH --peak larger|smaller|same|not-smaller --bytes fewer|more|same
                 --gathers fewer|more|same

LOW and HIGH are path prefixes of the knob's low and high setting (PREFIX.json
is the report, PREFIX.mlir the dist IR). Prints one line per measure with
`ok` when HIGH moves it in the stated direction against LOW."""

import argparse
import json
import re


def measures(prefix):
    rank = json.load(open(prefix + ".json"))["ranks"][0]
    ops = len(re.findall(r"zdist\.all_gather ", open(prefix + ".mlir").read()))
    return rank["peak_device_bytes"]["total"], rank["comm_bytes"].get("all_gather", 0), ops


def verdict(low, high, direction):
    ok = {"larger": high > low, "smaller": high < low, "same": high == low,
          "not-smaller": high >= low,
          "more": high > low, "fewer": high < low}[direction]
    return f"{low} -> {high} ({direction}: {'ok' if ok else 'WRONG'})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("low")
    parser.add_argument("high")
    parser.add_argument("--peak", required=True)
    parser.add_argument("--bytes", required=True)
    parser.add_argument("--gathers", required=True)
    args = parser.parse_args()
    low, high = measures(args.low), measures(args.high)
    print(f"{args.name} peak bytes: {verdict(low[0], high[0], args.peak)}")
    print(f"{args.name} all-gather bytes per step: {verdict(low[1], high[1], args.bytes)}")
    print(f"{args.name} all-gather ops: {verdict(low[2], high[2], args.gathers)}")


if __name__ == "__main__":
    main()
