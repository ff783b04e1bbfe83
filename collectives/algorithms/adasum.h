// Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation", MLSys 2021;
// Horovod's op=Adasum): two gradients combine as
//     adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b,
// which is their sum when they are orthogonal and their average when they are equal, so a
// larger job does not need a smaller learning rate. n ranks combine pairwise in log2 n levels
// (ranks r and r xor 2^k, the lower half of the tree always as `a`), as Horovod does.
//
// Algorithm: vector halving, distance doubling. At level k each rank keeps half of its current
// segment and sends the other half to its partner, so the ranks of each 2^(k+1) group hold
// disjoint pieces of both sides' vectors; the three dot products are summed over that group
// (recursive doubling of three doubles), and each rank combines its piece. After log2 n levels
// every rank owns 1/n of the result, and the halving is retraced backwards to gather it.
// Bytes sent per rank: about 2 * size, as the ring's. Every element is computed by one rank and
// copied to the others, so all ranks end bit-identical. Dot products accumulate in float64;
// values travel and combine as float64 for float64 tensors, as float32 for the others.
#pragma once

#include <cstddef>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

// Float dtypes only, and a power-of-two number of ranks (Horovod's rule for its CPU Adasum):
// InvalidArgument otherwise, naming what was wrong. `input` may equal `output`. The scale
// factors multiply the input before and the result after.
void adasumAllreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
                     double prescale = 1.0, double postscale = 1.0);

// The check alone, for callers that reject an operation before it reaches the ranks.
void checkAdasum(DType dtype, int ranks);

}  // namespace hvd::collectives
