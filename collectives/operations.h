// The collectives on tensors (pointer, dtype, shape): argument checks that name the bad value,
// the exchange of shapes and splits between ranks, and output allocation through a callback
// (so a framework can allocate its own tensor). The algorithms underneath see only bytes.
// Every rank must call the same operations in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/algorithms/allgather.h"
#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/broadcast.h"
#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"

namespace hvd::collectives {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // empty: a scalar

  std::size_t numElements() const;
  std::size_t rowElements() const;  // elements per index of the first dimension
  std::size_t bytes() const { return numElements() * dtypeSize(dtype); }
};

// Checks one rank can make alone, shared by the collectives below and the engine's checks on
// submission. `what` starts the InvalidArgument message ("alltoall", `alltoall "x"`).
void checkTensor(std::string_view what, const Tensor& t);  // dimensions >= 0, data if needed
void checkSameElements(std::string_view what, const Tensor& input, const Tensor& output);
void checkRoot(const std::string& what, int root, int size);
void checkScatterable(const std::string& what, const Tensor& input);   // not a scalar
void checkConcatenable(const std::string& what, const Tensor& input);  // not a scalar
// A reduction the dtype has: bool has sum/max (or), min/product (and), no average and no scaling.
void checkReduction(std::string_view what, DType dtype, ReduceOp op, double prescale = 1.0,
                    double postscale = 1.0);
// The rows alltoall sends each of `size` ranks: `splits`, or an equal split when empty.
std::vector<int64_t> alltoallSplits(const std::string& what, const Tensor& input,
                                    const std::vector<int64_t>& splits, int size);

// Returns memory for an output tensor of the given shape (and the operation's dtype).
using Allocate = std::function<void*(const std::vector<int64_t>& shape)>;

// `output` may be `input` (in place); both must have the same dtype and element count.
void allreduce(Comm& comm, const Tensor& input, const Tensor& output, ReduceOp op,
               const AllreduceOptions& options = {});
void broadcast(Comm& comm, const Tensor& tensor, int root, const BroadcastOptions& options = {});
// Concatenates every rank's tensor along the first dimension, which may differ per rank; the
// other dimensions and the dtype must agree (InvalidArgument naming the ranks otherwise).
Tensor allgather(Comm& comm, const Tensor& input, const Allocate& allocate,
                 AllgatherAlgorithm algorithm = AllgatherAlgorithm::Auto);

// The metadata steps of allgather and alltoall, shared with the GPU backends: every rank's
// rows, exchanged over `comm` and checked for agreement (InvalidArgument naming the ranks).
struct GatherPlan {
  std::vector<int64_t> shape;  // the concatenated output
  std::vector<int64_t> rows;   // first-dimension rows from each rank
};
GatherPlan planAllgather(Comm& comm, const Tensor& input);

struct AlltoallPlan {
  std::vector<int64_t> sendRows, recvRows;  // per peer
  std::vector<int64_t> shape;               // the received output
};
AlltoallPlan planAlltoall(Comm& comm, const Tensor& input, const std::vector<int64_t>& splits);

struct AlltoallResult {
  Tensor output;
  std::vector<int64_t> receivedSplits;  // rows received from each rank
};
// Sends splits[j] rows of `input` (in order) to rank j; empty splits mean an equal split (the
// first dimension must then divide by the size). Splits must be non-negative, one per rank, and
// sum to at most the first dimension.
AlltoallResult alltoall(Comm& comm, const Tensor& input, const std::vector<int64_t>& splits,
                        const Allocate& allocate);
// Reduces every rank's tensor and gives rank r the r-th part of the first dimension (split as
// evenly as possible, the first parts one row larger). Sum or Average; not for scalars.
Tensor reducescatter(Comm& comm, const Tensor& input, ReduceOp op, const Allocate& allocate);

}  // namespace hvd::collectives
