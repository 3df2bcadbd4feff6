# lit configuration for zcc: FileCheck tests of the compiler's dialects, passes,
# importers and tools.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "zcc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zcc_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.zcc_src_root, "examples")))
config.substitutions.append(("%python", config.python_executable))

# `not`, FileCheck and count come from LLVM 19's tools directory; put it on PATH
# so a RUN line that starts with `not` finds it.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["zcc", "zcc-opt", "zrun", "zplan"], [config.zcc_tools_dir])

# `gpu` where a CUDA device answers (nvidia-smi lists one), so tests of the
# cuda backend's behaviour without a device can say UNSUPPORTED: gpu.
import shutil
import subprocess

if shutil.which("nvidia-smi"):
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20)
        if listed.returncode == 0 and b"GPU" in listed.stdout:
            config.available_features.add("gpu")
    except (OSError, subprocess.TimeoutExpired):
        pass
