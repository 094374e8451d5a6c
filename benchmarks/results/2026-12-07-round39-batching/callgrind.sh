#!/bin/bash
# Instruction counts (callgrind) of draining N pods at 1000 nodes, old (session start) and new.
out=/tmp/r39/callgrind.txt; : > $out
for cfg in default /tmp/r39/list-no-defaults.yaml; do
 for own in plain owned; do
  for ver in old new; do
   if [ $ver = old ]; then src=/tmp/old; else src=/work/main; fi
   for n in 0 200; do
    c=$(cd $src && PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /tmp/r39/drain.py $cfg $own $n 1000 2>&1 | grep Collected | awk '{print $4}')
    echo "$(basename $cfg) $own $ver $n $c" >> $out
   done
  done
 done
done
echo done >> $out
