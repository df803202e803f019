#!/bin/sh
# The "bench/idle" stage image of bench/operator: a stage pod that ignores its arguments
# (--job, --rank, --device) and sleeps until the process kubelet stops it, so that hundreds of
# stage pods cost a 2-core machine nothing while the operator's own work is measured.
exec sleep infinity
