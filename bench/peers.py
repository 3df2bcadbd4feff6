"""The peers of bench/gpu_bench.sh: the same GPT-2-style decoder trained by
PyTorch DDP or FSDP2, or served by torch.distributed.pipelining, on the GPUs
of one node. Prints one JSON line with tokens/s, TFLOP/s per GPU and peak
memory per GPU, the figures zcc's runs print.

  torchrun --nproc-per-node 2 bench/peers.py --system ddp --preset gpt2-medium
  torchrun --nproc-per-node 2 bench/peers.py --system fsdp2 --preset gpt2-xl
  torchrun --nproc-per-node 2 bench/peers.py --system pipeline --preset gpt2-xl --batch 32 --chunks 8
  python3 bench/peers.py --system single-infer --preset gpt2-xl --batch 32
"""

import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "gpt2-medium": dict(layers=24, width=1024, heads=16),
    "gpt2-xl": dict(layers=48, width=1600, heads=25),
    "gpt-6.7b": dict(layers=32, width=4096, heads=32),
    "gpt-13b": dict(layers=40, width=5120, heads=40),
}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, vocab, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids, labels=None):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        if labels is None:
            return logits
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))


def flops_per_token(layers, width, vocab, seq, params):
    # 6N for the matrix products of forward and backward, plus attention's
    # 12 * layers * seq * width (PaLM's accounting).
    return 6 * params + 12 * layers * seq * width


def train(args, size):
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = GPT(size["layers"], size["width"], size["heads"], args.vocab, args.seq).cuda()
    params = sum(p.numel() for p in model.parameters())
    if args.system == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
        autocast = torch.autocast("cuda", dtype=torch.bfloat16)
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.h:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        autocast = torch.autocast("cuda", enabled=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with autocast:
            loss = model(ids, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    seconds = sum(times) / len(times)
    tokens = args.batch * args.seq * world / seconds
    peak = torch.tensor([torch.cuda.max_memory_allocated()], device="cuda")
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        fpt = flops_per_token(size["layers"], size["width"], args.vocab, args.seq, params)
        print(json.dumps({"system": args.system, "model": args.preset, "params": params,
                          "tokens_per_s": tokens, "tflops_per_gpu": tokens * fpt / world / 1e12,
                          "peak_gib": peak.item() / 2**30, "step_s": seconds,
                          "loss": loss.item()}), flush=True)
    dist.destroy_process_group()


def infer(args, size):
    torch.manual_seed(0)
    model = GPT(size["layers"], size["width"], size["heads"], args.vocab, args.seq)
    model = model.to(torch.bfloat16).cuda().eval()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    times = []
    with torch.no_grad():
        for step in range(args.warmup + args.steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(ids)
            torch.cuda.synchronize()
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
    seconds = sum(times) / len(times)
    print(json.dumps({"system": "single-infer", "model": args.preset, "latency_s": seconds,
                      "tokens_per_s": args.batch * args.seq / seconds,
                      "peak_gib": torch.cuda.max_memory_allocated() / 2**30}), flush=True)


def pipeline(args, size):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    full = GPT(size["layers"], size["width"], size["heads"], args.vocab, args.seq)
    per = size["layers"] // world

    class Stage(nn.Module):
        def __init__(self, first, last):
            super().__init__()
            self.first, self.last = first, last
            self.wte, self.wpe = (full.wte, full.wpe) if first else (None, None)
            self.h = nn.ModuleList(full.h[rank * per:(rank + 1) * per])
            self.ln_f = full.ln_f if last else None
            self.head = full.wte if last else None

        def forward(self, x):
            if self.first:
                x = self.wte(x) + self.wpe(torch.arange(x.shape[1], device=x.device))
            for block in self.h:
                x = block(x)
            if self.last:
                x = self.ln_f(x) @ self.head.weight.t()
            return x

    stage_module = Stage(rank == 0, rank == world - 1).to(torch.bfloat16).cuda().eval()
    micro = args.batch // args.chunks
    example = (torch.randint(0, args.vocab, (micro, args.seq), device="cuda") if rank == 0 else
               torch.zeros(micro, args.seq, size["width"], dtype=torch.bfloat16, device="cuda"))
    stage = PipelineStage(stage_module, rank, world, torch.device("cuda", rank), input_args=(example,))
    schedule = ScheduleGPipe(stage, n_microbatches=args.chunks)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    times = []
    with torch.no_grad():
        for step in range(args.warmup + args.steps):
            dist.barrier()
            torch.cuda.synchronize()
            start = time.perf_counter()
            if rank == 0:
                schedule.step(ids)
            else:
                schedule.step()
            torch.cuda.synchronize()
            dist.barrier()
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
    seconds = sum(times) / len(times)
    if rank == 0:
        print(json.dumps({"system": "torch-pipelining", "model": args.preset, "stages": world,
                          "chunks": args.chunks, "latency_s": seconds,
                          "tokens_per_s": args.batch * args.seq / seconds}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", required=True, choices=["ddp", "fsdp2", "pipeline", "single-infer"])
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS))
    parser.add_argument("--batch", type=int, default=8, help="micro-batch per GPU (training) or batch (inference)")
    parser.add_argument("--chunks", type=int, default=8, help="micro-batches of the pipeline")
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    size = PRESETS[args.preset]
    {"ddp": train, "fsdp2": train, "pipeline": pipeline, "single-infer": infer}[args.system](args, size)


if __name__ == "__main__":
    main()
