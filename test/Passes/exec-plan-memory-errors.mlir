// RUN: plan-opt %s --exec-plan-memory="cost-params=nccl_p2p_gib=-1" -verify-diagnostics -o /dev/null

// expected-error @below {{exec-plan-memory: --cost-params: nccl_p2p_gib=-1: expected a number of GiB from 0 to 1024}}
module {
}
