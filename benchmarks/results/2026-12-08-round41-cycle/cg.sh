#!/bin/bash
out=/tmp/r41/callgrind4.txt; : > $out
for obs in 0 1; do
for ver in old new3; do
  src=/tmp/r41/$ver
  for n in 200 400; do
   c=$(cd $src && PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /work/main/benchmarks/results/2026-12-08-round40-metrics/drain.py $n 1000 $obs 2>&1 | grep Collected | awk '{print $4}')
   echo "obs=$obs $ver $n $c" >> $out
  done
done
done
echo done >> $out
