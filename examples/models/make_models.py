#!/usr/bin/python3
"""Write the example ONNX models that zcc compiles.

Three models, each with its loss in the graph (training) or without it
(``--no-loss``, inference):

  linear-mse          Linear(100 -> 10) trained with MSE (the ZeRO-3 guide's model)
  simple-transformer  Embedding(10000 -> 512), four Linear(512 -> 512) with ReLU
                      between them, Linear(512 -> 10000), cross-entropy
                      (the pipeline guide's model)
  gpt2                a GPT-2 decoder of any size, laid out as Hugging Face's
                      GPT-2 exports (parameter names wte, wpe, h.{i}.attn.c_attn, ...)

The graphs look like torch.onnx.export's: nodes are named after the module
that made them (``/h.0/attn/MatMul_1``), parameters after the module path
(``h.0.attn.c_attn.weight``). The graph's initializers are exactly the
trainable parameters; every other constant (shapes, the causal mask, scalars)
is a Constant node. Parameters are drawn as GPT-2 draws them: normal(0, 0.02)
for matrices and embeddings, ones and zeros for norms and biases, from
``--seed``.

Needs only numpy and onnx (Debian's python3-numpy and python3-onnx), not torch.
"""

import argparse
import contextlib
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

GPT2_PRESETS = {
    "tiny": dict(layers=2, width=64, heads=4, vocab=128, seq=32),
    "gpt2-medium": dict(layers=24, width=1024, heads=16, vocab=50304, seq=1024),
    "gpt2-xl": dict(layers=48, width=1600, heads=25, vocab=50304, seq=1024),
}
SIZE_OPTIONS = {
    "layers": "number of decoder blocks",
    "width": "hidden size",
    "heads": "attention heads (must divide width)",
    "vocab": "vocabulary size",
    "seq": "sequence length (fixed; also the number of positions)",
}
SIMPLE_TRANSFORMER = dict(vocab=10000, width=512, layers=4, seq=128)
LINEAR_MSE = dict(n_in=100, n_out=10)

MIN_OPSET, MAX_OPSET = 13, 18
# IR version 8 is the one onnx 1.12 writes and covers opsets 13 to 18; fixing it
# keeps the files identical whichever onnx version runs this script.
IR_VERSION = 8
# Weights above this need --external-data. Protobuf caps a model file at 2 GiB,
# and writing, checking or loading an inline model takes several times its size
# in memory (7 GB for gpt2-medium's 1.4 GB), so both large presets are refused.
INLINE_WEIGHTS_LIMIT = 1 << 30
# As onnx.save_model's size_threshold: smaller tensors stay inside the model.
EXTERNAL_DATA_THRESHOLD = 1024
# Tensors start at page boundaries of the data file, so that it can be mapped.
EXTERNAL_DATA_ALIGNMENT = 4096
LAYER_NORM_EPSILON = 1e-5
# Cross-entropy skips labels of this value, as torch.nn.functional.cross_entropy.
IGNORE_INDEX = -100


class InlineWeights:
    """Stores each initializer inside the model (raw_data)."""

    def add(self, name, array):
        return numpy_helper.from_array(array, name)

    def close(self):
        pass


class ExternalWeights:
    """Streams initializers into one external-data file as they are drawn.

    onnx.save_model(save_as_external_data=True, all_tensors_to_one_file=True)
    would need every tensor in memory at once (6 GB for gpt2-xl); this writes
    the same layout (location/offset/length entries, one file, tensors under
    EXTERNAL_DATA_THRESHOLD bytes inline) holding one tensor at a time.
    """

    def __init__(self, data_path):
        self.location = os.path.basename(data_path)
        self.file = open(data_path, "wb")

    def add(self, name, array):
        tensor = numpy_helper.from_array(array, name)
        if array.nbytes < EXTERNAL_DATA_THRESHOLD:
            return tensor
        self.file.write(b"\0" * (-self.file.tell() % EXTERNAL_DATA_ALIGNMENT))
        offset = self.file.tell()
        self.file.write(tensor.raw_data)
        set_external_data(tensor, self.location, offset, len(tensor.raw_data))
        tensor.ClearField("raw_data")
        return tensor

    def close(self):
        self.file.close()


class SizedWeights(ExternalWeights):
    """External data with the layout ExternalWeights writes but no values: the
    data file is sparse (holes where the tensors would be). For compiling a
    large model's plan, which reads only the tensors' sizes; the plan then runs
    with zrun --weights random."""

    sized_only = True

    def add_shape(self, name, shape):
        tensor = onnx.TensorProto()
        tensor.name = name
        tensor.data_type = onnx.TensorProto.FLOAT
        tensor.dims.extend(shape)
        length = 4 * math.prod(shape)
        if length < EXTERNAL_DATA_THRESHOLD:
            tensor.raw_data = bytes(length)
            return tensor
        end = self.file.seek(0, os.SEEK_END)
        offset = end + (-end % EXTERNAL_DATA_ALIGNMENT)
        self.file.seek(offset + length - 1)
        self.file.write(b"\0")
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", offset), ("length", length)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        return tensor


class GraphBuilder:
    """Builds a graph the way torch.onnx.export names it.

    Scopes play the role of torch modules: inside ``scope("h.0")`` and
    ``scope("attn")`` a MatMul is named ``/h.0/attn/MatMul`` (``_1``, ``_2``
    for the next ones) and a parameter "weight" is ``h.0.attn.weight``.
    Parameters are only recorded while the graph is built; ``make_model``
    draws them afterwards, one tensor at a time, in the order they were made.
    """

    def __init__(self, opset, batch):
        self.opset = opset
        self.batch = batch
        self.nodes = []
        self.inputs = []
        self.outputs = []
        self.params = []  # (name, shape, init) with init "normal", "ones" or "zeros"
        self.scopes = []
        self.name_counts = {}
        self.constants = set()
        self.dropout_ratio = 0.0  # > 0: Dropout nodes in training mode where GPT-2 has them

    @contextlib.contextmanager
    def scope(self, name):
        self.scopes.append(name)
        try:
            yield
        finally:
            self.scopes.pop()

    def op(self, op_type, *inputs, n_outputs=1, **attrs):
        """Adds a node; returns its output name, or a list of them."""
        base = "/" + "/".join(self.scopes + [op_type])
        count = self.name_counts.get(base, 0)
        self.name_counts[base] = count + 1
        name = base if count == 0 else f"{base}_{count}"
        outputs = [f"{name}_output_{i}" for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        return outputs[0] if n_outputs == 1 else outputs

    def constant(self, key, value, dtype):
        """A Constant node named after key, made once and shared by all its users."""
        if key not in self.constants:
            tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), key)
            self.nodes.append(helper.make_node("Constant", [], [key], name=f"/{key}/Constant", value=tensor))
            self.constants.add(key)
        return key

    def param(self, name, shape, init):
        full_name = ".".join(self.scopes + [name])
        self.params.append((full_name, tuple(shape), init))
        return full_name

    def input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, tensor, name, elem_type, shape):
        """Makes tensor a graph output called name."""
        for node in self.nodes:
            node.output[:] = [name if t == tensor else t for t in node.output]
            node.input[:] = [name if t == tensor else t for t in node.input]
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def dropout(self, x):
        """x through Dropout in training mode (as torch.onnx.export writes it under model.train()),
        or x itself without --dropout."""
        if not self.dropout_ratio:
            return x
        return self.op("Dropout", x, self.constant("dropout_ratio", self.dropout_ratio, np.float32),
                       self.constant("dropout_training", True, bool))

    def param_bytes(self):
        return sum(4 * math.prod(shape) for _, shape, _ in self.params)

    # Ops whose form depends on the opset.

    def reduce_mean(self, x, axes, keepdims):
        """ReduceMean over axes (all axes when None): an attribute before opset 18, an input from 18."""
        if axes is None:
            return self.op("ReduceMean", x, keepdims=keepdims)
        if self.opset >= 18:
            key = "axes_" + "_".join(str(a).replace("-", "m") for a in axes)
            return self.op("ReduceMean", x, self.constant(key, axes, np.int64), keepdims=keepdims)
        return self.op("ReduceMean", x, axes=axes, keepdims=keepdims)

    def split_equal(self, x, parts, part_size, axis):
        """Split into equal parts: sizes as an input (opsets 13-17), num_outputs from 18."""
        if self.opset >= 18:
            return self.op("Split", x, n_outputs=parts, axis=axis, num_outputs=parts)
        sizes = self.constant(f"split_{parts}x{part_size}", [part_size] * parts, np.int64)
        return self.op("Split", x, sizes, n_outputs=parts, axis=axis)

    def layer_norm(self, x, width):
        """LayerNormalization from opset 17; before it, the decomposition torch exports."""
        weight = self.param("weight", [width], "ones")
        bias = self.param("bias", [width], "zeros")
        if self.opset >= 17:
            return self.op("LayerNormalization", x, weight, bias, axis=-1, epsilon=LAYER_NORM_EPSILON)
        centered = self.op("Sub", x, self.reduce_mean(x, [-1], keepdims=1))
        squared = self.op("Pow", centered, self.constant("two", 2.0, np.float32))
        variance = self.reduce_mean(squared, [-1], keepdims=1)
        eps = self.constant("layer_norm_epsilon", LAYER_NORM_EPSILON, np.float32)
        normed = self.op("Div", centered, self.op("Sqrt", self.op("Add", variance, eps)))
        return self.op("Add", self.op("Mul", normed, weight), bias)

    def make_model(self, graph_name, doc, weights, seed):
        """Draws the parameters (normal(0, 0.02), ones, zeros) in order and assembles the model."""
        rng = np.random.default_rng(seed)
        initializers = []
        for name, shape, init in self.params:
            if getattr(weights, "sized_only", False):
                initializers.append(weights.add_shape(name, shape))
                continue
            if init == "normal":
                array = rng.standard_normal(shape, dtype=np.float32)
                array *= 0.02
            else:
                array = np.full(shape, 1.0 if init == "ones" else 0.0, dtype=np.float32)
            initializers.append(weights.add(name, array))
            del array  # before the next one is drawn
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, initializers, doc_string=doc)
        return helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            ir_version=IR_VERSION,
            producer_name="zcc examples/models/make_models.py",
        )


def conv1d(b, x, n_in, n_out):
    """Hugging Face GPT-2's Conv1D: x @ weight + bias, weight stored [in, out]."""
    y = b.op("MatMul", x, b.param("weight", [n_in, n_out], "normal"))
    return b.op("Add", y, b.param("bias", [n_out], "zeros"))


def linear(b, x, n_in, n_out):
    """torch.nn.Linear on a [batch, seq, in] input: weight stored [out, in] as in torch,
    transposed by a Transpose node so that the initializer keeps its name and layout."""
    weight = b.op("Transpose", b.param("weight", [n_out, n_in], "normal"), perm=[1, 0])
    return b.op("Add", b.op("MatMul", x, weight), b.param("bias", [n_out], "zeros"))


def lm_outputs(b, logits, vocab, seq, with_loss):
    """Graph outputs of a language model: logits [batch, seq, vocab], or the mean
    cross-entropy of logits against the labels input [batch, seq]."""
    if not with_loss:
        b.output(logits, "logits", TensorProto.FLOAT, [b.batch, seq, vocab])
        return
    labels = b.input("labels", TensorProto.INT64, [b.batch, seq])
    flat_logits = b.op("Reshape", logits, b.constant("logits_2d_shape", [-1, vocab], np.int64))
    flat_labels = b.op("Reshape", labels, b.constant("flat_shape", [-1], np.int64))
    loss = b.op("SoftmaxCrossEntropyLoss", flat_logits, flat_labels, reduction="mean", ignore_index=IGNORE_INDEX)
    b.output(loss, "loss", TensorProto.FLOAT, [])


def build_linear_mse(b, with_loss):
    n_in, n_out = LINEAR_MSE["n_in"], LINEAR_MSE["n_out"]
    x = b.input("x", TensorProto.FLOAT, [b.batch, n_in])
    with b.scope("linear"):
        weight = b.param("weight", [n_out, n_in], "normal")
        y_pred = b.op("Gemm", x, weight, b.param("bias", [n_out], "zeros"), transB=1)
    if not with_loss:
        b.output(y_pred, "y_pred", TensorProto.FLOAT, [b.batch, n_out])
        return "Linear(100 -> 10)"
    y = b.input("y", TensorProto.FLOAT, [b.batch, n_out])
    diff = b.op("Sub", y_pred, y)
    b.output(b.reduce_mean(b.op("Mul", diff, diff), None, keepdims=0), "loss", TensorProto.FLOAT, [])
    return "Linear(100 -> 10), MSE loss"


def build_simple_transformer(b, with_loss):
    cfg = SIMPLE_TRANSFORMER
    vocab, width, seq = cfg["vocab"], cfg["width"], cfg["seq"]
    input_ids = b.input("input_ids", TensorProto.INT64, [b.batch, seq])
    with b.scope("embedding"):
        x = b.op("Gather", b.param("weight", [vocab, width], "normal"), input_ids)
    for i in range(cfg["layers"]):
        with b.scope(f"layers.{i}"):
            x = linear(b, x, width, width)
        x = b.op("Relu", x)
    with b.scope("head"):
        logits = linear(b, x, width, vocab)
    lm_outputs(b, logits, vocab, seq, with_loss)
    return (f"Embedding({vocab} -> {width}), {cfg['layers']} x (Linear({width} -> {width}), ReLU), "
            f"Linear({width} -> {vocab})")


def gpt2_attention(b, x, width, heads, seq):
    head_dim = width // heads
    with b.scope("c_attn"):
        qkv = conv1d(b, x, width, 3 * width)
    q, k, v = b.split_equal(qkv, 3, width, axis=2)
    heads_shape = b.constant("heads_shape", [-1, seq, heads, head_dim], np.int64)
    q = b.op("Transpose", b.op("Reshape", q, heads_shape), perm=[0, 2, 1, 3])  # [B, H, T, D]
    k = b.op("Transpose", b.op("Reshape", k, heads_shape), perm=[0, 2, 3, 1])  # [B, H, D, T]
    v = b.op("Transpose", b.op("Reshape", v, heads_shape), perm=[0, 2, 1, 3])  # [B, H, T, D]
    scores = b.op("Div", b.op("MatMul", q, k), b.constant("attn_scale", math.sqrt(head_dim), np.float32))
    causal_mask = b.constant("causal_mask", np.tril(np.ones((seq, seq), dtype=bool))[None, None], bool)
    mask_fill = b.constant("mask_fill", np.finfo(np.float32).min, np.float32)
    probs = b.dropout(b.op("Softmax", b.op("Where", causal_mask, scores, mask_fill), axis=-1))
    context = b.op("Transpose", b.op("MatMul", probs, v), perm=[0, 2, 1, 3])  # [B, T, H, D]
    context = b.op("Reshape", context, b.constant("merged_heads_shape", [-1, seq, width], np.int64))
    with b.scope("c_proj"):
        return b.dropout(conv1d(b, context, width, width))


def gelu(b, x, form="erf"):
    """GELU as torch exports it before opset 20: the exact form, 0.5 * x * (1 + erf(x / sqrt(2))),
    or (form "tanh") GPT-2's own gelu_new, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    if form == "tanh":
        cubic = b.op("Mul", b.op("Pow", x, b.constant("three", 3.0, np.float32)),
                     b.constant("gelu_cubic", 0.044715, np.float32))
        inner = b.op("Mul", b.op("Add", x, cubic),
                     b.constant("sqrt_2_over_pi", math.sqrt(2.0 / math.pi), np.float32))
        one_plus = b.op("Add", b.op("Tanh", inner), b.constant("one", 1.0, np.float32))
    else:
        erf = b.op("Erf", b.op("Div", x, b.constant("sqrt_2", math.sqrt(2.0), np.float32)))
        one_plus = b.op("Add", erf, b.constant("one", 1.0, np.float32))
    scaled = b.op("Mul", x, one_plus)
    return b.op("Mul", scaled, b.constant("half", 0.5, np.float32))


def gpt2_block(b, x, width, heads, seq, gelu_form="erf"):
    with b.scope("ln_1"):
        h = b.layer_norm(x, width)
    with b.scope("attn"):
        h = gpt2_attention(b, h, width, heads, seq)
    x = b.op("Add", x, h)
    with b.scope("ln_2"):
        h = b.layer_norm(x, width)
    with b.scope("mlp"):
        with b.scope("c_fc"):
            h = conv1d(b, h, width, 4 * width)
        with b.scope("act"):
            h = gelu(b, h, gelu_form)
        with b.scope("c_proj"):
            h = b.dropout(conv1d(b, h, 4 * width, width))
    return b.op("Add", x, h)


def build_gpt2(b, with_loss, layers, width, heads, vocab, seq, gelu_form="erf"):
    input_ids = b.input("input_ids", TensorProto.INT64, [b.batch, seq])
    wte = b.param("wte.weight", [vocab, width], "normal")
    wpe = b.param("wpe.weight", [seq, width], "normal")
    with b.scope("wte"):
        tokens = b.op("Gather", wte, input_ids)
    with b.scope("wpe"):
        positions = b.op("Gather", wpe, b.constant("position_ids", np.arange(seq), np.int64))
    x = b.dropout(b.op("Add", tokens, positions))
    for i in range(layers):
        with b.scope(f"h.{i}"):
            x = gpt2_block(b, x, width, heads, seq, gelu_form)
    with b.scope("ln_f"):
        x = b.layer_norm(x, width)
    with b.scope("lm_head"):  # tied to the token embedding
        logits = b.op("MatMul", x, b.op("Transpose", wte, perm=[1, 0]))
    lm_outputs(b, logits, vocab, seq, with_loss)
    return (f"GPT-2 decoder: layers={layers} width={width} heads={heads} vocab={vocab} seq={seq}" +
            (" gelu=tanh" if gelu_form == "tanh" else ""))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="\n\n".join(__doc__.split("\n\n")[:3]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: make_models.py --model gpt2 --preset gpt2-xl --external-data -o gpt2-xl.onnx",
    )
    parser.add_argument("--model", required=True, choices=["linear-mse", "simple-transformer", "gpt2"],
                        help="which model (see above)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="model file to write")
    parser.add_argument("--no-loss", action="store_true", help="leave the loss out: outputs are y_pred or logits")
    parser.add_argument("--batch", type=int, metavar="N",
                        help="static batch size (default: a symbolic dimension named 'batch')")
    parser.add_argument("--opset", type=int, default=17, choices=range(MIN_OPSET, MAX_OPSET + 1), metavar="N",
                        help=f"ONNX opset, {MIN_OPSET} to {MAX_OPSET} (default 17; below 17 layer norm is decomposed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights (numpy default_rng; default 0)")
    parser.add_argument("--external-data", action="store_true",
                        help="store weights in OUT.onnx.data next to the model (required over 1 GiB of weights)")
    parser.add_argument("--sizes-only", action="store_true",
                        help="with --external-data: a sparse data file without values, for compiling "
                             "plans of large models that run with zrun --weights random")
    gpt2 = parser.add_argument_group("gpt2 size (a preset, then any of its values overridden)")
    gpt2.add_argument("--preset", choices=GPT2_PRESETS,
                      help="; ".join(f"{name}: " + " ".join(f"{k}={v}" for k, v in size.items())
                                     for name, size in GPT2_PRESETS.items()) + " (default tiny)")
    for key, meaning in SIZE_OPTIONS.items():
        gpt2.add_argument(f"--{key}", type=int, metavar="N", help=meaning)
    gpt2.add_argument("--dropout", type=float, default=0.0, metavar="P",
                      help="Dropout in training mode with ratio P where GPT-2 has it (embeddings, "
                           "attention probabilities, both residual branches), as torch.onnx.export "
                           "writes a model in train() mode; default 0: none")
    gpt2.add_argument("--gelu", choices=["erf", "tanh"], default="erf",
                      help="the MLP's GELU: the exact erf form (torch.nn.GELU; default) or GPT-2's "
                           "tanh approximation (HF gelu_new)")
    args = parser.parse_args(argv)
    if args.batch is not None and args.batch < 1:
        parser.error("--batch must be positive")
    given = {key: getattr(args, key) for key in SIZE_OPTIONS if getattr(args, key) is not None}
    if args.model != "gpt2":
        if given or args.preset or args.gelu != "erf" or args.dropout:
            parser.error(f"--preset, size options, --gelu and --dropout apply to gpt2 only, not {args.model}")
        return args
    args.gpt2_size = {**GPT2_PRESETS[args.preset or "tiny"], **given}
    if min(args.gpt2_size.values()) < 1:
        parser.error("gpt2 sizes must be positive")
    if not 0.0 <= args.dropout < 1.0:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.gpt2_size["width"] % args.gpt2_size["heads"]:
        parser.error(f"width {args.gpt2_size['width']} is not a multiple of heads {args.gpt2_size['heads']}")
    return args


def main(argv):
    args = parse_args(argv)
    b = GraphBuilder(args.opset, args.batch if args.batch is not None else "batch")
    with_loss = not args.no_loss
    if args.model == "linear-mse":
        doc = build_linear_mse(b, with_loss)
    elif args.model == "simple-transformer":
        doc = build_simple_transformer(b, with_loss)
    else:
        b.dropout_ratio = args.dropout
        doc = build_gpt2(b, with_loss, **args.gpt2_size, gelu_form=args.gelu)
        if args.dropout:
            doc += f" dropout={args.dropout:g}"

    param_bytes = b.param_bytes()
    if param_bytes > INLINE_WEIGHTS_LIMIT and not args.external_data:
        sys.exit(f"make_models.py: error: {args.model} has {param_bytes / 1e9:.1f} GB of weights, more than "
                 f"1 GiB inside the model file; add --external-data to write them to {args.output}.data")

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    if args.sizes_only and not args.external_data:
        sys.exit("make_models.py: error: --sizes-only needs --external-data")
    weights = (SizedWeights(args.output + ".data") if args.sizes_only else
               ExternalWeights(args.output + ".data") if args.external_data else InlineWeights())
    try:
        model = b.make_model(args.model, doc, weights, args.seed)
    finally:
        weights.close()
    onnx.save_model(model, args.output)

    n_params = sum(math.prod(shape) for _, shape, _ in b.params)
    summary = f"wrote {args.output}: {doc}; {n_params:,} parameters; opset {args.opset}"
    if args.sizes_only:
        print(f"{summary}; weights: sizes only (sparse {args.output}.data)")
    elif args.opset <= onnx.defs.onnx_opset_version():
        onnx.checker.check_model(args.output)  # by path: also finds the external data
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        print(f"{summary}; onnx.checker and strict shape inference passed")
    else:
        print(f"{summary}; not checked: onnx {onnx.__version__} knows opsets up to {onnx.defs.onnx_opset_version()}")


if __name__ == "__main__":
    main(sys.argv[1:])
