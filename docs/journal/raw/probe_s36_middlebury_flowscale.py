"""Middlebury at flow_scale 2 for the record (session 36 probe): benchmark_middlebury.evaluate with an
Interpolator whose options' flow_scale is set past the (0, 1] check."""
import json, sys
from pathlib import Path
from benchmark_middlebury import evaluate
from engine import Interpolator, InterpolatorOptions
scale = float(sys.argv[1])
options = InterpolatorOptions(device="cpu", tile=0)
object.__setattr__(options, "flow_scale", scale)
res = evaluate(Interpolator(options), Path("../shared/data/middlebury"), progress=False)
json.dump(res, open(f"/tmp/fs2/mb_{scale}.json", "w"), indent=1)
print(scale, {k: v for k, v in res.items() if not isinstance(v, (dict, list))})
