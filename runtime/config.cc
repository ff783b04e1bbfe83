#include "runtime/config.h"

#include <unistd.h>

#include "common/error.h"

namespace hvd::runtime {
namespace {

std::string localHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void checkBelow(const char* what, int value, const char* limitName, int limit) {
  if (value >= limit)
    throw InvalidArgument(detail::concat(what, "=", value, " must be below ", limitName, "=",
                                         limit));
}

}  // namespace

Config Config::fromParams(const params::ParamValues& v) {
  Config c;
  Topology& t = c.topology;
  t.rank = static_cast<int>(v.getInt("HVD_RANK"));
  t.size = static_cast<int>(v.getInt("HVD_SIZE"));
  t.localRank = static_cast<int>(v.getInt("HVD_LOCAL_RANK"));
  t.localSize = static_cast<int>(v.getInt("HVD_LOCAL_SIZE"));
  t.crossRank = static_cast<int>(v.getInt("HVD_CROSS_RANK"));
  t.crossSize = static_cast<int>(v.getInt("HVD_CROSS_SIZE"));
  t.hostname = v.getString("HVD_HOSTNAME");
  if (t.hostname.empty()) t.hostname = localHostname();
  checkBelow("HVD_RANK", t.rank, "HVD_SIZE", t.size);
  checkBelow("HVD_LOCAL_RANK", t.localRank, "HVD_LOCAL_SIZE", t.localSize);
  checkBelow("HVD_CROSS_RANK", t.crossRank, "HVD_CROSS_SIZE", t.crossSize);

  c.rendezvousAddr = v.getString("HVD_RENDEZVOUS_ADDR");
  c.rendezvousPort = static_cast<uint16_t>(v.getInt("HVD_RENDEZVOUS_PORT"));
  c.secret = v.getString("HVD_SECRET");
  c.jobId = v.getString("HVD_JOB_ID");
  if (t.size > 1) {
    if (c.rendezvousAddr.empty())
      throw InvalidArgument(detail::concat("HVD_SIZE=", t.size,
                                           " but HVD_RENDEZVOUS_ADDR is not set: start multi-rank "
                                           "jobs with hvdrun"));
    if (c.rendezvousPort == 0)
      throw InvalidArgument("HVD_RENDEZVOUS_PORT is not set (HVD_RENDEZVOUS_ADDR=" +
                            c.rendezvousAddr + ")");
    if (c.secret.empty())
      throw InvalidArgument("HVD_SECRET is not set: workers must be started by hvdrun, which "
                            "hands each worker the job secret");
  }
  c.startTimeout = std::chrono::seconds(v.getInt("HVD_START_TIMEOUT"));
  c.opTimeout = std::chrono::seconds(v.getInt("HVD_OP_TIMEOUT"));
  c.ringThresholdBytes = static_cast<std::size_t>(v.getInt("HVD_ALLREDUCE_RING_THRESHOLD"));
  c.segmentBytes = static_cast<std::size_t>(v.getInt("HVD_SEGMENT_BYTES"));
  c.socketBufferBytes = static_cast<std::size_t>(v.getInt("HVD_SOCKET_BUFFER_BYTES"));
  c.logLevel = v.getString("HVD_LOG_LEVEL");
  c.logSubsystems = v.getString("HVD_LOG_SUBSYS");
  return c;
}

}  // namespace hvd::runtime
