#!/bin/bash
out=/tmp/r40/callgrind-hints3.txt; : > $out
src=/tmp/new3
for obs in 0 1; do
 for run in 0 1; do
  c=$(cd $src && RUN=$run PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /work/main/benchmarks/results/2026-12-08-round40-metrics/hints.py 1000 100 $obs 2>&1 | grep Collected | awk '{print $4}')
  echo "head obs=$obs run=$run $c" >> $out
 done
done
echo done >> $out
