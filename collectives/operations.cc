#include "collectives/operations.h"

#include <numeric>
#include <set>
#include <string>

#include "collectives/algorithms/allgather.h"
#include "collectives/algorithms/alltoall.h"
#include "collectives/algorithms/reducescatter.h"
#include "collectives/algorithms/ring.h"
#include "common/format.h"

namespace hvd::collectives {
namespace {

constexpr std::size_t kMaxDims = 8;

// Everyone's fixed-size record of {dtype, ndim, dims...}.
std::vector<std::vector<int64_t>> exchangeShapes(Comm& comm, const Tensor& t) {
  if (t.shape.size() > kMaxDims)
    throw InvalidArgument(detail::concat("allgather: tensors of more than ", kMaxDims,
                                         " dimensions are not supported (shape ",
                                         shapeText(t.shape), ")"));
  const std::size_t width = 2 + kMaxDims;
  std::vector<int64_t> mine(width, 0), all(width * comm.size());
  mine[0] = static_cast<int64_t>(t.dtype);
  mine[1] = static_cast<int64_t>(t.shape.size());
  std::copy(t.shape.begin(), t.shape.end(), mine.begin() + 2);
  allgatherv(comm, mine.data(), all.data(),
             std::vector<std::size_t>(comm.size(), width * sizeof(int64_t)));
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < comm.size(); ++r)
    out.emplace_back(all.begin() + r * width, all.begin() + (r + 1) * width);
  return out;
}

}  // namespace

void checkTensor(std::string_view what, const Tensor& t) {
  for (int64_t d : t.shape)
    if (d < 0)
      throw InvalidArgument(
          detail::concat(what, ": negative dimension in shape ", shapeText(t.shape)));
  if (!t.data && t.numElements() > 0)
    throw InvalidArgument(
        detail::concat(what, ": null data pointer for shape ", shapeText(t.shape)));
}

void checkSameElements(std::string_view what, const Tensor& input, const Tensor& output) {
  if (input.dtype != output.dtype || input.numElements() != output.numElements())
    throw InvalidArgument(detail::concat(what, ": output ", dtypeName(output.dtype),
                                         shapeText(output.shape), " does not match input ",
                                         dtypeName(input.dtype), shapeText(input.shape)));
}

void checkRoot(const std::string& what, int root, int size) {
  if (root < 0 || root >= size)
    throw InvalidArgument(
        detail::concat(what, ": root rank ", root, " is outside [0, ", size, ")"));
}

void checkScatterable(const std::string& what, const Tensor& input) {
  if (input.shape.empty())
    throw InvalidArgument(what +
                          ": cannot scatter a scalar (shape []): give the tensor a first "
                          "dimension");
}

void checkConcatenable(const std::string& what, const Tensor& input) {
  if (input.shape.empty())
    throw InvalidArgument(what +
                          ": cannot concatenate scalars (shape []): give the tensor a "
                          "first dimension (e.g. shape [1])");
}

void checkReduction(std::string_view what, DType dtype, ReduceOp op, double prescale,
                    double postscale) {
  if (dtype != DType::Bool) return;
  if (op == ReduceOp::Average)
    throw InvalidArgument(detail::concat(
        what,
        ": reduce op average is not defined for dtype bool (sum and max are a logical or, min "
        "and product a logical and; or convert the tensor to an integer type)"));
  if (prescale != 1.0 || postscale != 1.0)
    throw InvalidArgument(detail::concat(what, ": scale factors (prescale ", prescale,
                                         ", postscale ", postscale,
                                         ") are not defined for dtype bool"));
}

std::vector<int64_t> alltoallSplits(const std::string& what, const Tensor& input,
                                    const std::vector<int64_t>& splits, int size) {
  if (input.shape.empty()) throw InvalidArgument(what + ": cannot split a scalar (shape [])");
  int64_t rows = input.shape[0];
  std::vector<int64_t> send = splits;
  if (send.empty()) {
    if (rows % size != 0)
      throw InvalidArgument(detail::concat(what, ": first dimension ", rows,
                                           " does not divide into ", size,
                                           " equal splits; pass splits"));
    send.assign(size, rows / size);
  }
  if (static_cast<int>(send.size()) != size)
    throw InvalidArgument(detail::concat(what, ": ", send.size(), " splits for ", size, " ranks"));
  for (int64_t s : send)
    if (s < 0) throw InvalidArgument(detail::concat(what, ": negative split ", s));
  int64_t total = std::accumulate(send.begin(), send.end(), int64_t{0});
  if (total > rows)
    throw InvalidArgument(
        detail::concat(what, ": splits sum to ", total, " rows but the first dimension is ", rows));
  return send;
}

std::size_t Tensor::numElements() const {
  std::size_t n = 1;
  for (int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t Tensor::rowElements() const {
  std::size_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= static_cast<std::size_t>(shape[i]);
  return n;
}

void allreduce(Comm& comm, const Tensor& input, const Tensor& output, ReduceOp op,
               const AllreduceOptions& options) {
  checkTensor("allreduce", input);
  checkTensor("allreduce", output);
  checkSameElements("allreduce", input, output);
  allreduce(comm, input.data, output.data, input.numElements(), input.dtype, op, options);
}

void broadcast(Comm& comm, const Tensor& tensor, int root, const BroadcastOptions& options) {
  checkTensor("broadcast", tensor);
  broadcast(comm, tensor.data, tensor.bytes(), root, options);
}

GatherPlan planAllgather(Comm& comm, const Tensor& input) {
  checkTensor("allgather", input);
  checkConcatenable("allgather", input);
  auto shapes = exchangeShapes(comm, input);
  std::vector<int> disagree;
  for (int r = 0; r < comm.size(); ++r) {
    const auto& s = shapes[r];
    bool same = s[0] == shapes[0][0] && s[1] == shapes[0][1] &&
                std::equal(s.begin() + 3, s.end(), shapes[0].begin() + 3);
    if (!same) disagree.push_back(r);
  }
  if (!disagree.empty())
    throw InvalidArgument(detail::concat("allgather: ranks ", rankSet(disagree),
                                         " have a different dtype or trailing dimensions than "
                                         "rank 0 (this rank: ",
                                         dtypeName(input.dtype), shapeText(input.shape), ")"));
  GatherPlan plan{input.shape, {}};
  plan.shape[0] = 0;
  for (const auto& s : shapes) {
    plan.shape[0] += s[2];
    plan.rows.push_back(s[2]);
  }
  return plan;
}

Tensor allgather(Comm& comm, const Tensor& input, const Allocate& allocate,
                 AllgatherAlgorithm algorithm) {
  GatherPlan plan = planAllgather(comm, input);
  Tensor out{nullptr, input.dtype, plan.shape};
  std::vector<std::size_t> blockBytes;
  std::size_t rowBytes = input.rowElements() * dtypeSize(input.dtype);
  for (int64_t rows : plan.rows) blockBytes.push_back(static_cast<std::size_t>(rows) * rowBytes);
  out.data = allocate(out.shape);
  if (out.numElements() > 0)
    allgatherv(comm, input.data, out.data, blockBytes, kAllgatherSegmentBytes, algorithm);
  return out;
}

AlltoallPlan planAlltoall(Comm& comm, const Tensor& input, const std::vector<int64_t>& splits) {
  checkTensor("alltoall", input);
  int n = comm.size();
  AlltoallPlan plan;
  plan.sendRows = alltoallSplits("alltoall", input, splits, n);
  // Tell each peer how many rows of which width and dtype to expect.
  std::vector<int64_t> meta(3 * n), theirs(3 * n);
  for (int j = 0; j < n; ++j) {
    meta[3 * j] = plan.sendRows[j];
    meta[3 * j + 1] = static_cast<int64_t>(input.rowElements());
    meta[3 * j + 2] = static_cast<int64_t>(input.dtype);
  }
  std::vector<std::size_t> metaBytes(n, 3 * sizeof(int64_t));
  alltoallv(comm, meta.data(), metaBytes, theirs.data(), metaBytes);
  std::vector<int> disagree;
  for (int j = 0; j < n; ++j)
    if (theirs[3 * j + 1] != meta[1] || theirs[3 * j + 2] != meta[2]) disagree.push_back(j);
  if (!disagree.empty())
    throw InvalidArgument(detail::concat("alltoall: ranks ", rankSet(disagree),
                                         " send rows of a different width or dtype than this "
                                         "rank's ",
                                         dtypeName(input.dtype), shapeText(input.shape)));
  plan.shape = input.shape;
  plan.shape[0] = 0;
  for (int j = 0; j < n; ++j) {
    plan.recvRows.push_back(theirs[3 * j]);
    plan.shape[0] += theirs[3 * j];
  }
  return plan;
}

AlltoallResult alltoall(Comm& comm, const Tensor& input, const std::vector<int64_t>& splits,
                        const Allocate& allocate) {
  AlltoallPlan plan = planAlltoall(comm, input, splits);
  AlltoallResult result;
  result.output = {nullptr, input.dtype, plan.shape};
  result.receivedSplits = plan.recvRows;
  std::size_t rowBytes = input.rowElements() * dtypeSize(input.dtype);
  std::vector<std::size_t> sendBytes, recvBytes;
  for (int j = 0; j < comm.size(); ++j) {
    sendBytes.push_back(static_cast<std::size_t>(plan.sendRows[j]) * rowBytes);
    recvBytes.push_back(static_cast<std::size_t>(plan.recvRows[j]) * rowBytes);
  }
  result.output.data = allocate(result.output.shape);
  alltoallv(comm, input.data, sendBytes, result.output.data, recvBytes);
  return result;
}

Tensor reducescatter(Comm& comm, const Tensor& input, ReduceOp op, const Allocate& allocate) {
  checkTensor("reducescatter", input);
  checkScatterable("reducescatter", input);
  Blocks rowBlocks = evenBlocks(static_cast<std::size_t>(input.shape[0]), comm.size());
  Blocks blocks;
  for (int r = 0; r < comm.size(); ++r) {
    blocks.offsets.push_back(rowBlocks.offsets[r] * input.rowElements());
    blocks.counts.push_back(rowBlocks.counts[r] * input.rowElements());
  }
  Tensor out{nullptr, input.dtype, input.shape};
  out.shape[0] = static_cast<int64_t>(rowBlocks.counts[comm.rank()]);
  out.data = allocate(out.shape);
  reducescatter(comm, input.data, out.data, blocks, input.dtype, op);
  return out;
}

}  // namespace hvd::collectives
