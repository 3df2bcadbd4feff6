"""Checks where `zcc --report=json` puts the model states under CPU offload.

  offload_bytes.py MODEL.onnx STAGE1_OFFLOAD.json STAGE3_OFFLOAD_PARAM.json STAGE3.json

All three reports are for 2 ranks. Stage 1 with offload_optimizer: no
optimizer state on the device; on the host Adam's two moments and the fp32
master copy of the rank's rows (12 bytes per element; every parameter of the
tiny GPT-2 has an even first dimension or is updated through a host master
copy of its own). Stage 3 with offload_param: the host holds the
partitioned shards, the device only the persistent parameters."""

import json
import math
import sys

import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
sizes = [math.prod(t.dims) for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
stage1, stage3_offload, stage3 = (json.load(open(p))["ranks"][0] for p in sys.argv[2:5])

half = sum(sizes) // 2
device_opt = stage1["peak_device_bytes"].get("optimizer_state", 0)
host_opt = stage1["host_bytes"].get("optimizer_state", 0)
ok = device_opt == 0 and host_opt == 12 * half
print(f"stage 1 offload: device optimizer_state {device_opt}, host optimizer_state = 12 x {host_opt // 12} elements: {'ok' if ok else f'MISMATCH (expected 12 x {half})'}")

shard_bytes = stage3["peak_device_bytes"]["parameters"]
host_params = stage3_offload["host_bytes"].get("parameters", 0)
device_params = stage3_offload["peak_device_bytes"].get("parameters", 0)
# Without offload the device holds the shards plus the persistent
# parameters; with offload_param the shards move and the rest stays.
ok = host_params + device_params == shard_bytes and host_params > 0
print(f"stage 3 offload_param: host parameters = 4 x {host_params // 4} elements (the partitioned shards): {'ok' if ok else 'MISMATCH'}")
ok = device_params < shard_bytes
print(f"stage 3 offload_param: device parameters {device_params} < {shard_bytes} without offload: {'ok' if ok else 'MISMATCH'}")
