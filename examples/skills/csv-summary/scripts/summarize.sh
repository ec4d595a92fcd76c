#!/bin/sh
# summarize.sh FILE COLUMN: the data rows of a CSV file and the total of
# one column (the first line is the header).
awk -F, -v col="$2" 'NR > 1 { n++; s += $col } END { printf "rows=%d total=%d\n", n, s }' "$1"
