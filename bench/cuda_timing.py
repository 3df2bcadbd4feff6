"""Median milliseconds of a CUDA operation, as the bench scripts time torch.

run(i) launches the operation on operand set i (0, 1, 2 in turn, so that
the L2 cache does not hold the operands); one warm-up run, then `repeats`
runs each between two CUDA events.
"""

import torch


def median_ms(run, repeats, sets=3):
    run(0)
    torch.cuda.synchronize()
    times = []
    for r in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(r % sets)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]
