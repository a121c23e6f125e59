"""Session 30: a copy of a weights file whose network config applies each level's flow decoder N times (the same
tensors and metadata otherwise).

    python docs/journal/raw/set_flow_iterations_s30.py IN.safetensors N OUT.safetensors
    python docs/journal/raw/set_flow_iterations_s30.py IN.safetensors 1,2,2,2 OUT.safetensors  (per level, coarse first)
"""
import json, sys
from safetensors import safe_open
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1], sys.argv[3]
n = [int(v) for v in sys.argv[2].split(",")]
with safe_open(src, framework="pt") as f:
    meta = dict(f.metadata())
config = json.loads(meta["config"]); config["flow_iterations"] = n
meta["config"] = json.dumps(config)
save_file(load_file(src), dst, metadata=meta)
