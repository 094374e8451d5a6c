#!/bin/bash
out=/tmp/r40/callgrind-hints2.txt; : > $out
for ver in old new; do
  if [ $ver = old ]; then src=/tmp/old; else src=/tmp/new2; fi
  for obs in 0 1; do
   for run in 0 1; do
    c=$(cd $src && RUN=$run PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /work/main/benchmarks/results/2026-12-08-round40-metrics/hints.py 1000 100 $obs 2>&1 | grep Collected | awk '{print $4}')
    echo "$ver obs=$obs run=$run $c" >> $out
   done
  done
done
echo done >> $out
