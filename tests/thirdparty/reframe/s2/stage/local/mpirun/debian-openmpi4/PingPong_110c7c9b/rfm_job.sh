#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun.openmpi --oversubscribe -np 1 /tmp/rfm-fixture/s2/stage/local/mpirun/debian-openmpi4/BuildPingpong_bdce7558/build/pingpong --bytes 8 --iters 500 --batches 5 --warmup 50
