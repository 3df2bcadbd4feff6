#!/usr/bin/python3
"""Train one of export_torch.py's models in PyTorch with DeepSpeed's semantics.

The reference side of zcc's training-parity tests: the torch module starts
from the ONNX file's initializers (as zrun does by default), reads the same
DeepSpeed JSON config and the same token file, and writes one JSON object per
optimizer step, as `zrun --log-json` does:

    train_torch.py --onnx MODEL.onnx -c DS.json --data TOKENS.bin --steps 50 --log-json OUT.jsonl
    train_torch.py --make-data TOKENS.bin --tokens 8192 --vocab 128 --seed 0 [--distribution markov]

What it follows (DESIGN.md, DEEPSPEED.md, DeepSpeed's source), world size 1:

- The model (linear-mse, simple-transformer or gpt2) and its size are read
  from the ONNX initializers' names and shapes (gpt2's head count from the
  attention Reshape), or given as export_torch.py's --model/--preset/--layers
  ... options, which are then checked against the file. Every trainable
  parameter is loaded by name; a missing parameter, a shape or dtype
  difference, or a floating-point initializer that is no parameter (what
  torch.onnx.export's constant folding or initializer deduplication leaves) is
  an error: zrun would train that initializer as a weight of its own.
- Batch: train_batch_size / train_micro_batch_size_per_gpu /
  gradient_accumulation_steps reconciled as DeepSpeed does. A step's loss is
  the mean of its micro-batch losses; each micro-batch loss is divided by the
  accumulation count before backward, so the gradient is their mean.
- Data (--data, token models only): flat uint16 token ids (uint32 with a .u32
  suffix, or an .npy array). With sequence length T, sample i is
  tokens[i*T : i*T+T+1]: its first T tokens are input_ids, its last T the
  labels. Step s (0-based) takes samples [s*B, (s+1)*B); micro-step g, row b
  gets sample s*B + g*mb + b, modulo the number of samples, (len - 1) // T.
  --make-data writes such a file from numpy's default_rng(--seed): uniform
  ids, or (--distribution markov) a random first-order Markov chain with
  --branching successors per id, which a model can learn.
  linear-mse takes no --data: sample i of its seeded source is row i of
      rng = numpy.random.default_rng(--data-seed)
      A = rng.standard_normal((100, 10)) / 10
      x = rng.standard_normal((--samples, 100))
      y = x @ A + 0.1 * rng.standard_normal((--samples, 10))
  (float64 draws in that order, then cast to float32), indexed as above.
- Optimizer: "adam"/"adamw" (any case). AdamW, and Adam with adam_w_mode
  true (DeepSpeed's default), are torch.optim.AdamW (decoupled decay);
  Adam with adam_w_mode false is torch.optim.Adam (L2 decay added to the
  gradient). "sgd" is torch.optim.SGD. "lion" is Lion as DeepSpeed's
  FusedLion computes it (Lion below; torch has none); "adagrad" is
  torch.optim.Adagrad; "lamb" is DeepSpeed's FusedLamb (Lamb below).
  Adam/AdamW with bias_correction false is UncorrectedAdam below (torch's
  step with both bias corrections 1). Weight decay applies to every
  parameter, biases and norms included (DeepSpeed's default param group).
  foreach=False: one parameter at a time, the plainest arithmetic.
- Scheduler: WarmupLR, WarmupDecayLR, WarmupCosineLR with the formulas of
  deepspeed/runtime/lr_schedules.py. Built at last_batch_iteration -1 (which
  sets the lr to the schedule's value there: warmup_min_lr, or 0 for
  WarmupCosineLR) and stepped once after each optimizer step: step k
  (1-based) runs at t = k - 2. torch's StepLR, MultiStepLR, ExponentialLR,
  ConstantLR, LinearLR, PolynomialLR, CosineAnnealingLR,
  CosineAnnealingWarmRestarts and OneCycleLR (DeepSpeed's
  fallback for other names) are torch.optim.lr_scheduler's own classes:
  step k runs at their last_epoch k - 1; OneCycleLR's cycle_momentum sets
  the optimizer's beta1 as torch does.
- Gradient clipping: "gradient_clipping" (DeepSpeed's default 1.0 when absent;
  0 turns it off) as deepspeed.runtime.utils.clip_grad_norm_: total norm =
  sqrt(sum of each gradient's fp32 2-norm squared), every gradient times
  min(1, max_norm / (total_norm + 1e-6)).
- Log: {"step", "loss", "lr", "grad_norm"} per step: step 1-based, lr the one
  that step used, grad_norm the total norm before clipping.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from export_torch import GPT2, LinearMSE, SimpleTransformer
from make_models import GPT2_PRESETS, LINEAR_MSE, SIMPLE_TRANSFORMER, SIZE_OPTIONS


class UsageError(Exception):
    """A problem with the inputs: printed as one line, exit status 1."""


# ---------------------------------------------------------------------------
# The model: which one, its size, its initial weights.

def initializers(model_proto):
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in model_proto.graph.initializer}


def constant_values(model_proto):
    """Output name -> value of every Constant node and initializer (small ones)."""
    values = {}
    for node in model_proto.graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
    for tensor in model_proto.graph.initializer:
        if tensor.data_type == onnx.TensorProto.INT64:
            values[tensor.name] = numpy_helper.to_array(tensor)
    return values


def infer_heads(model_proto, seq, width):
    """GPT-2's head count from the attention's Reshape to [-1, T, H, W/H]."""
    values = constant_values(model_proto)
    for node in model_proto.graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        shape = values.get(node.input[1])
        if shape is None or shape.ndim != 1 or len(shape) != 4:
            continue
        _, t, heads, head_dim = (int(v) for v in shape)
        if t == seq and heads > 0 and heads * head_dim == width:
            return heads
    return None


def infer_model(args, weights, model_proto):
    """(model name, torch module) for the ONNX file, checked against the options."""
    if "linear.weight" in weights:
        name = "linear-mse"
    elif "embedding.weight" in weights:
        name = "simple-transformer"
    elif "wte.weight" in weights:
        name = "gpt2"
    else:
        raise UsageError(f"{args.onnx}: cannot tell the model from its initializers "
                         f"({', '.join(sorted(weights)[:5])}, ...); expected linear.weight, "
                         f"embedding.weight or wte.weight")
    if args.model and args.model != name:
        raise UsageError(f"--model {args.model}, but {args.onnx} holds a {name} model")
    if name == "linear-mse":
        return name, LinearMSE(**LINEAR_MSE)
    if name == "simple-transformer":
        return name, SimpleTransformer(**SIMPLE_TRANSFORMER)
    vocab, width = weights["wte.weight"].shape
    seq = weights["wpe.weight"].shape[0] if "wpe.weight" in weights else graph_input_dim(model_proto, 1)
    layers = len({key.split(".")[1] for key in weights if key.startswith("h.")})
    found = dict(layers=layers, width=width, vocab=vocab, seq=seq,
                 heads=infer_heads(model_proto, seq, width) if seq else None)
    size = dict(GPT2_PRESETS[args.preset]) if args.preset else {}
    size.update({key: getattr(args, key) for key in SIZE_OPTIONS if getattr(args, key) is not None})
    for key, value in found.items():
        if value is None:
            if key not in size:
                raise UsageError(f"{args.onnx}: cannot tell gpt2's {key} from the file; give --{key}")
        elif key in size and size[key] != value:
            raise UsageError(f"--{key} {size[key]} (from the options), but {args.onnx} has {key} {value}")
        else:
            size[key] = value
    if size["width"] % size["heads"]:
        raise UsageError(f"width {size['width']} is not a multiple of heads {size['heads']}")
    return name, GPT2(**size)


def load_weights(module, weights, onnx_path):
    """Copies every parameter from the initializer of its name; refuses extras."""
    parameters = dict(module.named_parameters())
    problems = []
    for name, parameter in parameters.items():
        if name not in weights:
            problems.append(f"parameter '{name}' {tuple(parameter.shape)} has no initializer of that name")
            continue
        array = weights[name]
        if tuple(array.shape) != tuple(parameter.shape):
            problems.append(f"initializer '{name}' is {tuple(array.shape)}, torch's parameter {tuple(parameter.shape)}")
        elif array.dtype != np.float32:
            problems.append(f"initializer '{name}' is {array.dtype}, not float32")
        else:
            with torch.no_grad():
                parameter.copy_(torch.from_numpy(array.copy()))
    extras = [name for name, array in weights.items()
              if name not in parameters and np.issubdtype(array.dtype, np.floating)]
    for name in extras:
        problems.append(f"floating-point initializer '{name}' {tuple(weights[name].shape)} is no torch parameter "
                        f"(constant folding or deduplication in the export?): zrun would train it separately")
    if problems:
        raise UsageError(f"{onnx_path}: the initializers are not the module's parameters:\n  "
                         + "\n  ".join(problems))


def graph_input_dim(model_proto, axis):
    """The first graph input's static dimension `axis` (0: batch, 1: sequence), or None."""
    names = {tensor.name for tensor in model_proto.graph.initializer}
    for value in model_proto.graph.input:
        if value.name in names:
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) > axis and dims[axis].HasField("dim_value"):
            return dims[axis].dim_value
        return None
    return None


# ---------------------------------------------------------------------------
# The config: batch, optimizer, scheduler, clipping.

def resolve_batch(config, world_size=1):
    """DeepSpeed's _set_batch_related_parameters and _batch_assertion."""
    tb = config.get("train_batch_size")
    mb = config.get("train_micro_batch_size_per_gpu")
    gas = config.get("gradient_accumulation_steps")
    for key, value in (("train_batch_size", tb), ("train_micro_batch_size_per_gpu", mb),
                       ("gradient_accumulation_steps", gas)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"config: {key} must be an integer, got {value!r}")
    if tb is not None and mb is not None and gas is not None:
        pass
    elif tb is not None and mb is not None:
        gas = tb // mb // world_size
    elif tb is not None and gas is not None:
        mb = tb // world_size // gas
    elif mb is not None and gas is not None:
        tb = mb * gas * world_size
    elif tb is not None:
        gas, mb = 1, tb // world_size
    elif mb is not None:
        gas, tb = 1, mb * world_size
    else:
        raise UsageError("config: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided")
    if tb <= 0 or mb <= 0 or gas <= 0:
        raise UsageError(f"config: batch sizes must be positive: train_batch_size {tb}, micro batch {mb}, "
                         f"gradient_accumulation_steps {gas}")
    if tb != mb * gas * world_size:
        raise UsageError(f"config: train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
                         f"world_size {tb} != {mb} * {gas} * {world_size}")
    return tb, mb, gas


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023) as DeepSpeed's FusedLion: p *= 1 - lr * wd;
    p -= lr * sign(beta1 * m + (1 - beta1) * g); m = beta2 * m + (1 - beta2) * g."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                update = (m * beta1).add_(p.grad * (1 - beta1)).sign_()
                p.add_(update, alpha=-group["lr"])
                m.mul_(beta2).add_(p.grad * (1 - beta2))


class UncorrectedAdam(torch.optim.Optimizer):
    """torch.optim.Adam(W)'s single-tensor step with bias_correction false
    (DeepSpeed's FusedAdam option): step size lr, denominator sqrt(v) + eps."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled=decoupled))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                g = p.grad
                if wd != 0:
                    if group["decoupled"]:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g.add(p, alpha=wd)
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                p.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-lr)


class Lamb(torch.optim.Optimizer):
    """LAMB as DeepSpeed's FusedLamb takes it (csrc/lamb): m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; u = m / (sqrt(v) + eps) + wd p (sqrt(v + eps) with
    eps_inside_sqrt); ratio = ||p|| / ||u|| clamped to [min_coeff, max_coeff],
    1 when either norm is 0; p -= (step_size * ratio) u with step_size =
    lr sqrt(1 - b2^t) / (1 - b1^t), or lr without bias_correction. The norms
    are summed in float64."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 eps_inside_sqrt=False, weight_decay=0.0, max_coeff=10.0, min_coeff=0.01):
        super().__init__(params, dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps,
                                      eps_inside_sqrt=eps_inside_sqrt, weight_decay=weight_decay,
                                      max_coeff=max_coeff, min_coeff=min_coeff))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "exp_avg" not in state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
                m.copy_(m * beta1 + (1 - beta1) * g)
                v.copy_(v * beta2 + (1 - beta2) * g * g)
                denom = (v + eps).sqrt() if group["eps_inside_sqrt"] else v.sqrt() + eps
                update = m / denom + group["weight_decay"] * p
                w_norm = float(p.double().square().sum().sqrt())
                u_norm = float(update.double().square().sum().sqrt())
                ratio = 1.0
                if w_norm != 0 and u_norm != 0:
                    ratio = min(max(w_norm / u_norm, group["min_coeff"]), group["max_coeff"])
                step_size = group["lr"]
                if group["bias_correction"]:
                    step_size = step_size * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                factor = torch.tensor(step_size, dtype=p.dtype) * torch.tensor(ratio, dtype=p.dtype)
                p.sub_(factor * update)


def make_optimizer(config, parameters):
    section = config.get("optimizer")
    if not section:
        raise UsageError("config: no \"optimizer\" section; a training run needs one")
    kind = str(section.get("type", "")).lower()
    params = dict(section.get("params", {}))
    if kind in ("adam", "adamw"):
        known = {"lr", "betas", "eps", "weight_decay", "bias_correction", "adam_w_mode", "amsgrad",
                 "torch_adam", "set_grad_none"}
        unknown = sorted(set(params) - known)
        if unknown:
            raise UsageError(f"config: optimizer.params: unknown key(s) {', '.join(unknown)}")
        if params.get("amsgrad", False):
            raise UsageError("config: optimizer.params.amsgrad is not supported (DeepSpeed's FusedAdam rejects it)")
        lr = float(params.get("lr", 1e-3))
        betas = tuple(float(b) for b in params.get("betas", (0.9, 0.999)))
        eps = float(params.get("eps", 1e-8))
        weight_decay = float(params.get("weight_decay", 0.0))
        # DeepSpeed: AdamW always decouples; Adam does unless adam_w_mode is false.
        decoupled = kind == "adamw" or params.get("adam_w_mode", True)
        if not params.get("bias_correction", True):
            return (UncorrectedAdam(parameters, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                    decoupled=decoupled),
                    f"UncorrectedAdam(lr={lr:g}, betas={betas}, eps={eps:g}, weight_decay={weight_decay:g}, "
                    f"decoupled={decoupled})")
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        optimizer = cls(parameters, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)
        return optimizer, f"{cls.__name__}(lr={lr:g}, betas={betas}, eps={eps:g}, weight_decay={weight_decay:g})"
    if kind == "sgd":
        known = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "foreach", "fused"}
        unknown = sorted(set(params) - known)
        if unknown:
            raise UsageError(f"config: optimizer.params: unknown or unsupported key(s) {', '.join(unknown)}")
        kwargs = dict(lr=float(params.get("lr", 1e-3)), momentum=float(params.get("momentum", 0.0)),
                      dampening=float(params.get("dampening", 0.0)),
                      weight_decay=float(params.get("weight_decay", 0.0)),
                      nesterov=bool(params.get("nesterov", False)))
        return torch.optim.SGD(parameters, foreach=False, **kwargs), f"SGD({kwargs})"
    if kind == "adagrad":
        known = {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps", "foreach", "fused"}
        unknown = sorted(set(params) - known)
        if unknown:
            raise UsageError(f"config: optimizer.params: unknown or unsupported key(s) {', '.join(unknown)}")
        kwargs = dict(lr=float(params.get("lr", 1e-2)), lr_decay=float(params.get("lr_decay", 0.0)),
                      weight_decay=float(params.get("weight_decay", 0.0)),
                      initial_accumulator_value=float(params.get("initial_accumulator_value", 0.0)),
                      eps=float(params.get("eps", 1e-10)))
        return torch.optim.Adagrad(parameters, foreach=False, **kwargs), f"Adagrad({kwargs})"
    if kind == "lion":
        unknown = sorted(set(params) - {"lr", "betas", "weight_decay", "set_grad_none"})
        if unknown:
            raise UsageError(f"config: optimizer.params: unknown key(s) {', '.join(unknown)}")
        lr = float(params.get("lr", 1e-3))
        betas = tuple(float(b) for b in params.get("betas", (0.9, 0.999)))
        weight_decay = float(params.get("weight_decay", 0.0))
        return (Lion(parameters, lr=lr, betas=betas, weight_decay=weight_decay),
                f"Lion(lr={lr:g}, betas={betas}, weight_decay={weight_decay:g})")
    if kind == "lamb":
        known = {"lr", "bias_correction", "betas", "eps", "eps_inside_sqrt", "weight_decay", "max_grad_norm",
                 "max_coeff", "min_coeff"}
        unknown = sorted(set(params) - known)
        if unknown:
            raise UsageError(f"config: optimizer.params: unknown or unsupported key(s) {', '.join(unknown)}")
        if float(params.get("max_grad_norm", 0.0)) != 0.0:
            raise UsageError("config: optimizer.params.max_grad_norm is not supported; use gradient_clipping")
        kwargs = dict(lr=float(params.get("lr", 1e-3)), bias_correction=bool(params.get("bias_correction", True)),
                      betas=tuple(float(b) for b in params.get("betas", (0.9, 0.999))),
                      eps=float(params.get("eps", 1e-8)),
                      eps_inside_sqrt=bool(params.get("eps_inside_sqrt", False)),
                      weight_decay=float(params.get("weight_decay", 0.0)),
                      max_coeff=float(params.get("max_coeff", 10.0)),
                      min_coeff=float(params.get("min_coeff", 0.01)))
        return Lamb(parameters, **kwargs), f"Lamb({kwargs})"
    raise UsageError(f"config: optimizer type {section.get('type')!r} is not supported here "
                     f"(Adam, AdamW, Adagrad, Lamb, Lion, SGD)")


def warmup_gamma(t, warmup_steps, warmup_type):
    """WarmupLR._get_gamma for t < warmup_steps (warmup_steps already max(2, .))."""
    if warmup_type == "linear":
        return t / warmup_steps
    return (1.0 / math.log(warmup_steps)) * math.log(t + 1)  # DeepSpeed's rounding: inverse_log_warm_up * log


# torch.optim.lr_scheduler's classes that zcc runs (DeepSpeed builds them for
# a scheduler type it does not define).
TORCH_SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
                    "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "OneCycleLR")


def make_schedule(config, base_lr):
    """lr(t) for t >= -1 (t = last_batch_iteration), the initial t, and a description.

    Follows deepspeed/runtime/lr_schedules.py: get_lr() below t = 0 gives the
    minimum (warmup_min_lr; WarmupCosineLR gives 0.0).
    """
    section = config.get("scheduler")
    if not section:
        return (lambda t: base_lr), -1, f"constant lr {base_lr:g}"
    kind = section.get("type")
    params = dict(section.get("params", {}))
    start = int(params.pop("last_batch_iteration", -1))

    def positive_steps(key):
        value = params.get(key, 1000)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"config: scheduler.params.{key} must be a positive integer, got {value!r}")
        return max(2, value)

    def check_keys(known):
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise UsageError(f"config: scheduler.params: unknown key(s) {', '.join(unknown)} for {kind}")

    def read_type():
        warmup_type = params.get("warmup_type", "log")
        if warmup_type not in ("log", "linear"):
            print(f"train_torch.py: warning: unknown warmup_type {warmup_type!r}, using 'log' (as DeepSpeed)",
                  file=sys.stderr)
            warmup_type = "log"
        return warmup_type

    if kind in ("WarmupLR", "WarmupDecayLR"):
        keys = ["warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type"]
        if kind == "WarmupDecayLR":
            keys.append("total_num_steps")
        check_keys(keys)
        min_lr = float(params.get("warmup_min_lr", 0.0))
        max_default = base_lr if kind == "WarmupLR" else 1e-3  # WarmupLR: None -> the optimizer's lr
        max_lr = params.get("warmup_max_lr")
        max_lr = float(max_default if max_lr is None else max_lr)
        warmup = positive_steps("warmup_num_steps")
        warmup_type = read_type()
        total = None
        if kind == "WarmupDecayLR":
            if "total_num_steps" not in params:
                raise UsageError("config: scheduler.params.total_num_steps is required by WarmupDecayLR")
            total = int(params["total_num_steps"])

        def lr(t):
            if t < 0:
                return min_lr
            if t < warmup:
                gamma = warmup_gamma(t, warmup, warmup_type)
            elif total is None:
                gamma = 1.0
            else:
                gamma = max(0.0, float(total - t) / float(max(1.0, total - warmup)))
            return min_lr + (max_lr - min_lr) * gamma

        text = f"{kind}(min {min_lr:g}, max {max_lr:g}, warmup {warmup} {warmup_type}"
        return lr, start, text + (f", total {total})" if total is not None else ")")

    if kind == "WarmupCosineLR":
        check_keys(["total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type"])
        if "total_num_steps" not in params:
            raise UsageError("config: scheduler.params.total_num_steps is required by WarmupCosineLR")
        total = int(params["total_num_steps"])
        warmup_min_ratio = float(params.get("warmup_min_ratio", 0.0))
        cos_min_ratio = float(params.get("cos_min_ratio", 1e-4))
        warmup = positive_steps("warmup_num_steps")
        warmup_type = read_type()

        def lr(t):
            if t < 0:
                return 0.0
            if t < warmup:
                ratio = warmup_min_ratio + (1.0 - warmup_min_ratio) * warmup_gamma(t, warmup, warmup_type)
            else:
                progress = min(1.0, (t - warmup + 1) / max(1, total - warmup))
                ratio = (1 + math.cos(math.pi * progress)) / 2
                ratio = max(0.0, cos_min_ratio + (1.0 - cos_min_ratio) * ratio)
            return base_lr * ratio

        return lr, start, (f"WarmupCosineLR(base {base_lr:g}, warmup {warmup} {warmup_type} from "
                           f"{warmup_min_ratio:g}, total {total}, cos_min_ratio {cos_min_ratio:g})")
    if kind in TORCH_SCHEDULERS:
        # DeepSpeed's fallback: torch's own class, built on the optimizer
        # (which steps it to last_epoch 0) and stepped after each optimizer
        # step; here on a stand-in optimizer, read at last_epoch t + 1.
        # OneCycleLR also cycles Adam's beta1 (cycle_momentum): its stand-in
        # has betas, and lr.beta1 gives them.
        cycles = kind == "OneCycleLR" and params.get("cycle_momentum", True)
        stand_in = (torch.optim.AdamW if cycles else torch.optim.SGD)(
            [torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
        scheduler = getattr(torch.optim.lr_scheduler, kind)(stand_in, **params)

        def current():
            group = stand_in.param_groups[0]
            return group["lr"], group.get("betas", (None,))[0]

        values = [current()]

        def at(t):
            while len(values) <= t + 1:
                stand_in.step()
                scheduler.step()
                values.append(current())
            return values[max(t, -1) + 1]

        def lr(t):
            return at(t)[0]

        if cycles:
            lr.beta1 = lambda t: at(t)[1]

        return lr, -1, f"torch {kind}({', '.join(f'{k}={v!r}' for k, v in params.items())})"
    raise UsageError(f"config: scheduler type {kind!r} is not supported here "
                     f"(WarmupLR, WarmupDecayLR, WarmupCosineLR, torch's {', '.join(TORCH_SCHEDULERS)})")


def gradient_clipping(config):
    value = config.get("gradient_clipping", 1.0)  # DeepSpeed's default since #8068
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UsageError(f"config: gradient_clipping must be a number >= 0, got {value!r}")
    return float(value)


def check_precision(config):
    for key in ("fp16", "bf16", "bfloat16"):
        section = config.get(key)
        if isinstance(section, dict) and section.get("enabled", False):
            raise UsageError(f"config: {key} is enabled; train_torch.py trains in fp32 only")


# ---------------------------------------------------------------------------
# Data.

def read_tokens(path):
    if path.endswith(".npy"):
        tokens = np.load(path)
        if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
            raise UsageError(f"{path}: expected a 1-D integer array, got {tokens.dtype} {tokens.shape}")
        return tokens
    return np.fromfile(path, dtype=np.uint32 if path.endswith(".u32") else np.uint16)


class TokenData:
    """DESIGN.md's token layout: sample i = tokens[i*T : i*T+T+1]."""

    def __init__(self, path, seq, vocab):
        self.tokens = read_tokens(path)
        self.seq = seq
        self.count = (len(self.tokens) - 1) // seq
        if self.count < 1:
            raise UsageError(f"{path}: {len(self.tokens)} tokens make no sample of {seq + 1}")
        top = int(self.tokens.max())
        if top >= vocab:
            raise UsageError(f"{path}: token id {top} is outside the model's vocabulary of {vocab}")

    def batch(self, first_sample, rows):
        ids = [(first_sample + row) % self.count for row in range(rows)]
        samples = np.stack([self.tokens[i * self.seq: i * self.seq + self.seq + 1] for i in ids]).astype(np.int64)
        return torch.from_numpy(samples[:, :-1].copy()), torch.from_numpy(samples[:, 1:].copy())


class RegressionData:
    """linear-mse's seeded source (see the module docstring)."""

    def __init__(self, seed, samples, n_in, n_out):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)
        self.x = rng.standard_normal((samples, n_in))
        self.y = (self.x @ a + 0.1 * rng.standard_normal((samples, n_out))).astype(np.float32)
        self.x = self.x.astype(np.float32)
        self.count = samples

    def batch(self, first_sample, rows):
        ids = [(first_sample + row) % self.count for row in range(rows)]
        return torch.from_numpy(self.x[ids]), torch.from_numpy(self.y[ids])


def make_data(args):
    if args.tokens is None or args.vocab is None:
        raise UsageError("--make-data needs --tokens N and --vocab V")
    if args.tokens < 2 or args.vocab < 1 or args.branching < 1:
        raise UsageError("--tokens must be at least 2, --vocab and --branching positive")
    dtype = np.uint32 if args.make_data.endswith(".u32") else np.uint16
    if args.vocab > np.iinfo(dtype).max + 1:
        raise UsageError(f"--vocab {args.vocab} does not fit {np.dtype(dtype).name}; name the file *.u32")
    rng = np.random.default_rng(args.seed)
    if args.distribution == "uniform":
        tokens = rng.integers(0, args.vocab, size=args.tokens, dtype=dtype)
        what = "uniform"
    else:
        # A first-order Markov chain: each id has --branching successors, drawn
        # uniformly, so a model can learn something (loss towards ln(branching)).
        successors = rng.integers(0, args.vocab, size=(args.vocab, args.branching))
        choices = rng.integers(0, args.branching, size=args.tokens)
        tokens = np.empty(args.tokens, dtype=dtype)
        current = int(rng.integers(0, args.vocab))
        for i in range(args.tokens):
            tokens[i] = current
            current = int(successors[current, choices[i]])
        what = f"markov, {args.branching} successors per id"
    os.makedirs(os.path.dirname(os.path.abspath(args.make_data)), exist_ok=True)
    tokens.tofile(args.make_data)
    print(f"wrote {args.make_data}: {args.tokens} {np.dtype(dtype).name} tokens below {args.vocab} "
          f"({what}), seed {args.seed}")


# ---------------------------------------------------------------------------
# Training.

def clip_grad_norm(parameters, max_norm):
    """deepspeed.runtime.utils.clip_grad_norm_ (fp32, one rank); returns the norm before clipping."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = torch.stack([g.detach().float().norm(2) for g in grads]).square().sum().sqrt()
    if max_norm > 0:
        clip_coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.dtype))
    return float(total_norm)


def train(args):
    model_proto = onnx.load(args.onnx)
    weights = initializers(model_proto)
    name, module = infer_model(args, weights, model_proto)
    load_weights(module, weights, args.onnx)
    if args.dtype == "float64":
        module = module.double()
    device = torch.device(args.device)
    module = module.to(device)
    module.train()

    with open(args.config) as f:
        config = json.load(f)
    check_precision(config)
    tb, mb, gas = resolve_batch(config)
    batch = graph_input_dim(model_proto, 0)
    if batch is not None and batch != mb:
        print(f"train_torch.py: warning: {args.onnx} has a static batch of {batch}, "
              f"but the micro batch is {mb}", file=sys.stderr)

    if name == "linear-mse":
        if args.data:
            raise UsageError("--data is for the token models; linear-mse uses its seeded source (--data-seed)")
        data = RegressionData(args.data_seed, args.samples, LINEAR_MSE["n_in"], LINEAR_MSE["n_out"])
        data_text = f"seeded regression source, seed {args.data_seed}, {data.count} samples"
    else:
        if not args.data:
            raise UsageError(f"{name} needs --data TOKENS.bin")
        vocab, seq = (module.vocab, module.wpe.num_embeddings) if name == "gpt2" else (
            SIMPLE_TRANSFORMER["vocab"], SIMPLE_TRANSFORMER["seq"])
        data = TokenData(args.data, seq, vocab)
        data_text = f"{args.data}, {data.count} samples of {seq}"

    parameters = [p for p in module.parameters() if p.requires_grad]
    optimizer, optimizer_text = make_optimizer(config, parameters)
    base_lr = optimizer.param_groups[0]["lr"]
    schedule, t, schedule_text = make_schedule(config, base_lr)
    def apply_schedule(t):
        for group in optimizer.param_groups:
            group["lr"] = schedule(t)
            if hasattr(schedule, "beta1"):
                if "betas" not in group:
                    raise UsageError("config: the scheduler cycles beta1, which this optimizer does not have")
                group["betas"] = (schedule.beta1(t), group["betas"][1])

    if t == -1:  # DeepSpeed sets the lr only when built at -1
        apply_schedule(t)
    max_norm = gradient_clipping(config)
    print(f"{name}: {sum(p.numel() for p in parameters)} parameters from {args.onnx}; {args.dtype}")
    print(f"batch {tb} = micro {mb} x accumulation {gas}; data {data_text}")
    print(f"{optimizer_text}; {schedule_text}; gradient_clipping {max_norm:g}")

    log = open(args.log_json, "w") if args.log_json else None
    every = int(config.get("steps_per_print", 10) or 10)
    records = []
    for step in range(args.steps):
        lr = optimizer.param_groups[0]["lr"]
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for g in range(gas):
            inputs = tuple(x.to(device) for x in data.batch(step * tb + g * mb, mb))
            if args.dtype == "float64":
                inputs = tuple(x.double() if x.is_floating_point() else x for x in inputs)
            loss = module(*inputs)
            (loss / gas).backward()
            losses.append(float(loss))
        grad_norm = clip_grad_norm(parameters, max_norm)
        optimizer.step()
        t += 1
        apply_schedule(t)
        record = {"step": step + 1, "loss": sum(losses) / len(losses), "lr": lr, "grad_norm": grad_norm}
        records.append(record)
        if log:
            log.write(json.dumps(record) + "\n")
        if not math.isfinite(record["loss"]):
            raise UsageError(f"step {step + 1}: loss is {record['loss']}")
        if (step + 1) % every == 0 or step == 0 or step + 1 == args.steps:
            print(f"step {step + 1:5d}  loss {record['loss']:.6f}  lr {lr:.4e}  grad_norm {grad_norm:.4f}")
    if log:
        log.close()
        print(f"wrote {args.log_json}: {len(records)} steps")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnx", metavar="MODEL.onnx", help="the model; its initializers are the initial weights")
    parser.add_argument("-c", "--config", metavar="DS.json", help="DeepSpeed config")
    parser.add_argument("--data", metavar="TOKENS.bin", help="token file (uint16; .u32: uint32; or .npy)")
    parser.add_argument("--steps", type=int, metavar="N", help="optimizer steps to run")
    parser.add_argument("--log-json", metavar="OUT.jsonl", help="write one JSON object per step")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="train in this precision (default float32; float64 shows fp32's rounding noise)")
    parser.add_argument("--data-seed", type=int, default=0, help="linear-mse: seed of its data source (default 0)")
    parser.add_argument("--samples", type=int, default=256, help="linear-mse: samples in its data source (default 256)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu",
                        help="torch device to train on (default cpu; cuda on a GPU machine, "
                             "where matmuls stay in full fp32: TF32 is off)")
    make = parser.add_argument_group("writing a token file instead of training")
    make.add_argument("--make-data", metavar="TOKENS.bin", help="write N random token ids (uint16; .u32: uint32)")
    make.add_argument("--tokens", type=int, metavar="N", help="how many")
    make.add_argument("--vocab", type=int, metavar="V",
                      help="ids are drawn uniformly from [0, V); when training, gpt2's vocabulary (checked)")
    make.add_argument("--seed", type=int, default=0, help="numpy default_rng seed (default 0)")
    make.add_argument("--distribution", choices=["uniform", "markov"], default="uniform",
                      help="uniform ids (default), or a random Markov chain a model can learn")
    make.add_argument("--branching", type=int, default=4, metavar="K",
                      help="markov: successors per id (default 4)")
    model = parser.add_argument_group("the model (default: read from the ONNX file; given, they are checked)")
    model.add_argument("--model", choices=["linear-mse", "simple-transformer", "gpt2"])
    model.add_argument("--preset", choices=GPT2_PRESETS)
    for key, meaning in SIZE_OPTIONS.items():
        if key != "vocab":  # --vocab above serves both: gpt2's vocabulary when training
            model.add_argument(f"--{key}", type=int, metavar="N", help=meaning)
    args = parser.parse_args(argv)
    if args.make_data:
        if args.onnx or args.config or args.steps is not None:
            parser.error("--make-data only writes a token file; run training separately")
    else:
        missing = [flag for flag, value in (("--onnx", args.onnx), ("-c", args.config), ("--steps", args.steps))
                   if value is None]
        if missing:
            parser.error(f"training needs {', '.join(missing)} (or --make-data to write a token file)")
        if args.steps < 1:
            parser.error("--steps must be positive")
        if args.samples < 1:
            parser.error("--samples must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        if args.make_data:
            make_data(args)
        else:
            train(args)
    except UsageError as error:
        print(f"train_torch.py: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
