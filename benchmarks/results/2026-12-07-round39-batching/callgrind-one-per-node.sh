#!/bin/bash
# One pod per node: pods of 2 CPUs on nodes with 3 left (4 CPUs, ten 100m pods bound).
out=/tmp/r39/callgrind-one-per-node.txt; : > $out
for cfg in default /tmp/r39/list-no-defaults.yaml; do
  for ver in old new; do
   if [ $ver = old ]; then src=/tmp/old; else src=/work/main; fi
   for n in 0 200; do
    c=$(cd $src && PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /tmp/r39/drain.py $cfg plain $n 1000 2 2>&1 | grep Collected | awk '{print $4}')
    echo "$(basename $cfg) plain-2cpu $ver $n $c" >> $out
   done
  done
done
echo done >> $out
