"""Session 30: a copy of a weights file whose network config applies each level's flow decoder N times (the same
tensors and metadata otherwise).

    python docs/journal/raw/set_flow_iterations_s30.py IN.safetensors N OUT.safetensors
"""
import json, sys
from safetensors import safe_open
from safetensors.torch import load_file, save_file
src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with safe_open(src, framework="pt") as f:
    meta = dict(f.metadata())
config = json.loads(meta["config"]); config["flow_iterations"] = n
meta["config"] = json.dumps(config)
save_file(load_file(src), dst, metadata=meta)
