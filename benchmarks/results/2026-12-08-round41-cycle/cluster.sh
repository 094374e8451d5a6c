#!/bin/bash
# py-scheduler alone, backlog at large: the session's start against HEAD, alternating.
cd /work/main
for i in 1 2; do
  for rev in 518b28e f8f32a4; do
    timeout 1500 .venv/bin/python benchmarks/cluster_bench.py --size large --scenarios throughput --modes backlog --schedulers py --py-source $rev --profile off --out /work/r41/backlog-$rev-$i > /work/r41/backlog-$rev-$i.log 2>&1
    echo "$rev $i rc=$?" >> /work/r41/cluster.txt
  done
done
echo done >> /work/r41/cluster.txt
