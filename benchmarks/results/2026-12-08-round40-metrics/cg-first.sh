#!/bin/bash
out=/tmp/r40/callgrind.txt; : > $out
for obs in 0 1; do
 for ver in old new; do
  if [ $ver = old ]; then src=/tmp/old; else src=/work/main; fi
  for n in 0 200; do
   c=$(cd $src && PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /tmp/r40/drain.py $n 1000 $obs 2>&1 | grep Collected | awk '{print $4}')
   echo "obs=$obs $ver $n $c" >> $out
  done
 done
done
echo done >> $out
