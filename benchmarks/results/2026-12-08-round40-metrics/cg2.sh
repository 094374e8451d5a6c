#!/bin/bash
out=/tmp/r40/callgrind2.txt; : > $out
for ver in old new; do
  if [ $ver = old ]; then src=/tmp/old; else src=/tmp/new; fi
  for n in 200 400; do
   c=$(cd $src && PYTHONHASHSEED=0 SRC=$src PYTHONPATH=$src valgrind --tool=callgrind --callgrind-out-file=/dev/null /work/main/.venv/bin/python /tmp/r40/drain.py $n 1000 1 2>&1 | grep Collected | awk '{print $4}')
   echo "obs=1 $ver $n $c" >> $out
  done
done
echo done >> $out
