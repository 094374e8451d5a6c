#!/bin/bash
# The loop's one-core ceiling: large, equal client, the main process under a 0.1-core quota.
cd /work/main
: > /work/r41/ceiling.txt
for i in 1 2; do
  for rev in 518b28e 4e5bc7b; do
    timeout 1500 .venv/bin/python benchmarks/cluster_bench.py --size large --scenarios throughput --modes equal --schedulers py --scheduler-cpus 0.1 --limit-main-only --py-source $rev --profile off --out /work/r41/ceiling-$rev-$i > /work/r41/ceiling-$rev-$i.log 2>&1
    echo "$rev $i rc=$?" >> /work/r41/ceiling.txt
  done
done
echo done >> /work/r41/ceiling.txt
