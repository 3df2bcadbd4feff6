"""Exports the import-test fixtures with a current torch and Hugging Face
transformers (torch 2.x's default exporter, opset 18 and later), which
Debian's torch 1.13 cannot produce. Run where those packages are installed
(the GPU machine has them); the outputs are committed next to this script.

    python3 make_fixtures.py OUT_DIR

Writes, all with random weights (norms and biases drawn too, so that no two
parameters are equal and the exporter's deduplication of equal initializers
cannot merge them) and a static batch of 2:
  torch2-linear-mse.onnx          the ZeRO-3 guide's Linear(100 -> 10) with its MSE loss
  torch2-simple-transformer.onnx  the pipeline guide's model, scaled down (vocab 1000,
                                  width 64, seq 16), with its cross-entropy loss
  torch2-gpt2-tiny.onnx           examples/models/export_torch.py's GPT-2 decoder (tiny), with loss
  hf-gpt2-tiny.onnx               transformers' GPT2LMHeadModel (2 layers, width 64, 4 heads,
                                  vocab 128, 32 positions), eager attention, with labels -> loss
  hf-gpt2-tiny-sdpa.onnx          the same model with its default attention, logits only
  manifest.json                   per fixture: producer versions, opset, ops, torch's parameter
                                  count and the count of weights the file holds (the default
                                  exporter folds tied and gathered weights into new ones)
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples", "models"))
import export_torch  # noqa: E402


def export(model, inputs, path, output_names):
    export_torch.randomize_norms_and_biases(model)
    model.eval()
    with torch.no_grad():
        program = torch.onnx.export(model, tuple(inputs.values()), path, input_names=list(inputs),
                                    output_names=output_names, external_data=False)
    del program
    import numpy as np
    import onnx
    from onnx import numpy_helper
    proto = onnx.load(path)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    weights = 0
    for tensor in proto.graph.initializer:
        value = numpy_helper.to_array(tensor)
        is_mask = np.isin(value, [0.0]).any() and np.all((value == 0) | (value <= -1e4))
        if value.dtype.kind == "f" and value.ndim > 0 and not is_mask:
            weights += value.size
    return {"opset": opset, "ir_version": proto.ir_version, "file_weights": weights,
            "initializers": len(proto.graph.initializer),
            "functions": len(proto.functions),
            "ops": sorted({n.op_type for n in proto.graph.node})}


def count(model):
    # Tied parameters (the lm head) count once, as named_parameters() yields them once.
    return sum(p.numel() for p in model.parameters())


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    manifest = {"torch": torch.__version__}
    gen = torch.Generator().manual_seed(0)

    model = export_torch.LinearMSE(100, 10)
    inputs = {"x": torch.randn(2, 100, generator=gen), "y": torch.randn(2, 10, generator=gen)}
    info = export(model, inputs, os.path.join(out, "torch2-linear-mse.onnx"), ["loss"])
    manifest["torch2-linear-mse"] = {**info, "parameters": count(model)}

    model = export_torch.SimpleTransformer(vocab=1000, width=64, layers=4, seq=16)
    inputs = {"input_ids": torch.randint(1000, (2, 16), generator=gen),
              "labels": torch.randint(1000, (2, 16), generator=gen)}
    info = export(model, inputs, os.path.join(out, "torch2-simple-transformer.onnx"), ["loss"])
    manifest["torch2-simple-transformer"] = {**info, "parameters": count(model)}

    model = export_torch.GPT2(layers=2, width=64, heads=4, vocab=128, seq=32)
    inputs = {"input_ids": torch.randint(128, (2, 32), generator=gen),
              "labels": torch.randint(128, (2, 32), generator=gen)}
    info = export(model, inputs, os.path.join(out, "torch2-gpt2-tiny.onnx"), ["loss"])
    manifest["torch2-gpt2-tiny"] = {**info, "parameters": count(model)}

    import transformers
    manifest["transformers"] = transformers.__version__
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(128, (2, 32), generator=gen)
    for name, implementation, with_loss in (("hf-gpt2-tiny", "eager", True),
                                            ("hf-gpt2-tiny-sdpa", "sdpa", False)):
        config._attn_implementation = implementation
        model = transformers.GPT2LMHeadModel(config)

        class Wrapper(torch.nn.Module):
            """Plain tensors in and out: (input_ids[, labels]) -> loss or logits."""

            def __init__(self, inner, with_loss):
                super().__init__()
                self.inner = inner
                self.with_loss = with_loss

            def forward(self, input_ids, labels=None):
                output = self.inner(input_ids=input_ids, labels=labels, use_cache=False)
                return output.loss if self.with_loss else output.logits

        wrapper = Wrapper(model, with_loss)
        inputs = {"input_ids": ids}
        if with_loss:
            inputs["labels"] = ids
        try:
            info = export(wrapper, inputs, os.path.join(out, f"{name}.onnx"),
                          ["loss" if with_loss else "logits"])
            manifest[name] = {**info, "parameters": count(model), "attention": implementation}
        except Exception as error:  # keep the other fixtures; report what failed
            manifest[name] = {"error": f"{type(error).__name__}: {error}"[:2000]}

    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
    print(json.dumps(manifest, indent=2, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
