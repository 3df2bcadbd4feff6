#!/usr/bin/python3
"""Export make_models.py's three models from PyTorch, with reference data.

The same models as torch.nn.Modules with the same parameter names and layouts
(linear.weight, layers.0.weight, wte.weight, h.0.attn.c_attn.weight, ...), so
weights carry over by name. Exported by torch.onnx.export in eval mode: given
labels, the module's forward returns the loss and the export holds it; with
``--no-loss`` it returns y_pred or logits. Weights come from torch's default
init (for gpt2, GPT-2's normal(0, 0.02) for embeddings and matrices), then
every bias and LayerNorm scale is drawn at random so that outputs depend on
all of them.

``--save-reference DIR`` writes what a runtime test compares against:
DIR/<input name>.npy for each graph input (deterministic, from --seed),
DIR/<output name>.npy for torch's outputs on them, and DIR/weights/<parameter
name>.npy for every parameter (reference.py --weights copies these into a
make_models.py model of the same size).
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from make_models import GPT2_PRESETS, LINEAR_MSE, SIMPLE_TRANSFORMER, SIZE_OPTIONS


class LinearMSE(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x, y=None):
        y_pred = self.linear(x)
        # F.mse_loss has no ONNX export in torch 1.13; this is the same mean.
        return y_pred if y is None else ((y_pred - y) ** 2).mean()


class SimpleTransformer(nn.Module):
    def __init__(self, vocab, width, layers, seq):
        super().__init__()
        self.vocab = vocab
        self.embedding = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids, labels=None):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = F.relu(layer(x))
        logits = self.head(x)
        if labels is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, self.vocab), labels.reshape(-1))


class Conv1D(nn.Module):
    """Hugging Face GPT-2's Conv1D: a linear layer whose weight is stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out).normal_(0.0, 0.02))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.width, self.heads, self.seq = width, heads, seq
        self.c_attn = Conv1D(width, 3 * width)
        self.c_proj = Conv1D(width, width)
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq)
        self.register_buffer("causal_mask", mask, persistent=False)
        self.register_buffer("mask_fill", torch.tensor(torch.finfo(torch.float32).min), persistent=False)

    def forward(self, x):
        head_dim = self.width // self.heads
        # -1 rather than x.shape[0], so that a dynamic batch traces as a constant shape.
        q, k, v = (t.reshape(-1, self.seq, self.heads, head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(self.width, dim=2))
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
        probs = torch.softmax(torch.where(self.causal_mask, scores, self.mask_fill), dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(-1, self.seq, self.width)
        return self.c_proj(context)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = Conv1D(width, 4 * width)
        self.act = nn.GELU()
        self.c_proj = Conv1D(4 * width, width)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, seq)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, layers, width, heads, vocab, seq):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.h = nn.ModuleList(Block(width, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.register_buffer("position_ids", torch.arange(seq), persistent=False)
        for embedding in (self.wte, self.wpe):  # GPT-2's init, not nn.Embedding's normal(0, 1)
            nn.init.normal_(embedding.weight, 0.0, 0.02)

    def forward(self, input_ids, labels=None):
        x = self.wte(input_ids) + self.wpe(self.position_ids)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # lm head tied to the token embedding
        if labels is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, self.vocab), labels.reshape(-1))


def randomize_norms_and_biases(model):
    """Draws every LayerNorm scale and every bias at random. At GPT-2's ones and
    zeros a reference comparison could not tell whether a runtime applies them,
    and torch.onnx.export would merge the equal tensors into one initializer."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
            if isinstance(getattr(module, "bias", None), nn.Parameter):
                module.bias.uniform_(-0.1, 0.1)


def build(args):
    """The module, its example inputs (name -> tensor) and its output name."""
    generator = torch.Generator().manual_seed(args.seed)
    batch = args.batch
    if args.model == "linear-mse":
        model = LinearMSE(**LINEAR_MSE)
        inputs = {"x": torch.randn(batch, LINEAR_MSE["n_in"], generator=generator)}
        if not args.no_loss:
            inputs["y"] = torch.randn(batch, LINEAR_MSE["n_out"], generator=generator)
        return model, inputs, "y_pred" if args.no_loss else "loss"
    if args.model == "simple-transformer":
        model = SimpleTransformer(**SIMPLE_TRANSFORMER)
        vocab, seq = SIMPLE_TRANSFORMER["vocab"], SIMPLE_TRANSFORMER["seq"]
    else:
        model = GPT2(**args.gpt2_size)
        vocab, seq = args.gpt2_size["vocab"], args.gpt2_size["seq"]
    inputs = {"input_ids": torch.randint(vocab, (batch, seq), generator=generator)}
    if not args.no_loss:
        inputs["labels"] = torch.randint(vocab, (batch, seq), generator=generator)
    return model, inputs, "logits" if args.no_loss else "loss"


def save_reference(directory, model, inputs, output_name, output):
    os.makedirs(os.path.join(directory, "weights"), exist_ok=True)
    for name, tensor in inputs.items():
        np.save(os.path.join(directory, f"{name}.npy"), tensor.numpy())
    np.save(os.path.join(directory, f"{output_name}.npy"), output.numpy())
    for name, param in model.named_parameters():
        np.save(os.path.join(directory, "weights", f"{name}.npy"), param.detach().numpy())


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, choices=["linear-mse", "simple-transformer", "gpt2"],
                        help="which model (as make_models.py)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="model file to write")
    parser.add_argument("--no-loss", action="store_true", help="export without the loss: outputs are y_pred or logits")
    parser.add_argument("--opset", type=int, default=17, choices=range(13, 18), metavar="N",
                        help="ONNX opset, 13 to 17 (default 17)")
    parser.add_argument("--batch", type=int, default=2, metavar="N", help="batch size of the example input (default 2)")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="make the batch dimension symbolic ('batch') instead of --batch")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and inputs (default 0)")
    parser.add_argument("--save-reference", metavar="DIR", help="write inputs, outputs and weights as .npy to DIR")
    gpt2 = parser.add_argument_group("gpt2 size (as make_models.py)")
    gpt2.add_argument("--preset", choices=GPT2_PRESETS, help="default tiny")
    for key, meaning in SIZE_OPTIONS.items():
        gpt2.add_argument(f"--{key}", type=int, metavar="N", help=meaning)
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be positive")
    given = {key: getattr(args, key) for key in SIZE_OPTIONS if getattr(args, key) is not None}
    if args.model != "gpt2" and (given or args.preset):
        parser.error(f"--preset and size options apply to gpt2 only, not {args.model}")
    args.gpt2_size = {**GPT2_PRESETS[args.preset or "tiny"], **given}
    if args.gpt2_size["width"] % args.gpt2_size["heads"]:
        parser.error(f"width {args.gpt2_size['width']} is not a multiple of heads {args.gpt2_size['heads']}")
    return args


def main(argv):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    model, inputs, output_name = build(args)
    randomize_norms_and_biases(model)
    model.eval()
    dynamic_axes = None
    if args.dynamic_batch:
        dynamic_axes = {name: {0: "batch"} for name in inputs}
        if args.no_loss:
            dynamic_axes[output_name] = {0: "batch"}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with torch.no_grad():
        output = model(*inputs.values())
        torch.onnx.export(
            model, tuple(inputs.values()), args.output,
            input_names=list(inputs), output_names=[output_name], dynamic_axes=dynamic_axes,
            opset_version=args.opset, training=torch.onnx.TrainingMode.EVAL,
            # Folding would turn a transposed parameter (the tied lm head, every
            # nn.Linear on 3-D input) into a new, anonymous initializer.
            do_constant_folding=False,
        )
    if args.save_reference:
        save_reference(args.save_reference, model, inputs, output_name, output)
    print(f"wrote {args.output}: {args.model}, opset {args.opset}, output {output_name} {tuple(output.shape)}")


if __name__ == "__main__":
    main(sys.argv[1:])
