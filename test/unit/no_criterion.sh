#!/bin/sh
echo "unit tests skipped: Criterion was not found at configure time (apt-get install libcriterion-dev, then re-run ./configure)"
exit 77
