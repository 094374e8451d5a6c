import sys, os
sys.path.insert(0, os.path.join(os.environ.get("SRC", "."), "benchmarks"))
import core_bench
from scheduler.config import load_config
cfg = sys.argv[1]; owned = sys.argv[2] == "owned"; n = int(sys.argv[3]); nodes = int(sys.argv[4])
cpu = sys.argv[5] if len(sys.argv) > 5 else "100m"
if cfg != "default":
    core_bench.CONFIG = load_config(cfg)
core, ports = core_bench.build(nodes, 10, owners=20 if owned else 0)
for i in range(n):
    owner = f"rs-{i % 20}" if owned else ""
    core.queue.add(core_bench._pod(f"p-{i}", cpu=cpu, memory="500Mi", owner=owner))
core_bench._drain(core, ports)
