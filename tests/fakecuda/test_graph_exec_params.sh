#!/usr/bin/env bash
# An exec's nodes are its own once instantiated: two execs of one captured graph (a copy, a host
# function, a kernel), the second's nodes changed with cudaGraphExecHostNodeSetParams,
# cudaGraphExecMemcpyNodeSetParams1D and cudaGraphExecKernelNodeSetParams (a kernel's function
# cannot change: cudaErrorInvalidValue); cudaGraph*NodeGetParams still read the graph's, the
# first exec replays as captured and the second as changed, in stream order.
. "$(dirname "$0")/lib.sh"
for us in 0 500; do
  FAKECUDA_ASYNC_US=$us fk_run probe execparams
  expect_line "nodes=3 copy=1 host=1 kernel=1"
  expect_line "instantiate=0,0 set host=0 copy=0 kernel=0 other_func=1"
  expect_line "graph keeps host=1 copy=1 kernel=1"
  expect_line "launch=0,0,0 sync=0 calls_a=1 calls_b=2 d=1 d_b=2 copy_b=1"
done
finish
