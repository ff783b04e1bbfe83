// The conversions the table's rows name (their third argument), overloaded on the member's type,
// and the one expansion of the rows that calls them.
#include "runtime/config_fields.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/error.h"
#include "common/param_options.h"

namespace hvd::runtime {
namespace {

using params::ParamId;
using params::ParamValues;

// The value in the member's own type.
void asIs(int& m, const ParamValues& v, ParamId id) { m = static_cast<int>(v.getInt(id)); }
void asIs(uint16_t& m, const ParamValues& v, ParamId id) {
  m = static_cast<uint16_t>(v.getInt(id));
}
void asIs(std::size_t& m, const ParamValues& v, ParamId id) {
  m = static_cast<std::size_t>(v.getInt(id));
}
void asIs(bool& m, const ParamValues& v, ParamId id) { m = v.getInt(id) == 1; }
void asIs(double& m, const ParamValues& v, ParamId id) { m = v.getDouble(id); }
void asIs(std::string& m, const ParamValues& v, ParamId id) { m = v.getString(id); }
// The table has already checked the names against the row's choices; these map them.
void asIs(collectives::AllreduceAlgorithm& m, const ParamValues& v, ParamId id) {
  m = collectives::parseAllreduceAlgorithm(v.getString(id));
}
void asIs(CpuBinding& m, const ParamValues& v, ParamId id) { m = cpuBindingFrom(v.getString(id)); }
void asIs(Transport& m, const ParamValues& v, ParamId id) {
  const std::string& name = v.getString(id);
  m = name == "tcp" ? Transport::Tcp : name == "shm" ? Transport::Shm : Transport::Auto;
}

// Units: the variable counts whole seconds, microseconds or MiB, or milliseconds with fractions.
template <class Rep, class Period>
void seconds(std::chrono::duration<Rep, Period>& m, const ParamValues& v, ParamId id) {
  m = std::chrono::seconds(v.getInt(id));
}
void microseconds(std::chrono::microseconds& m, const ParamValues& v, ParamId id) {
  m = std::chrono::microseconds(v.getInt(id));
}
void milliseconds(std::chrono::microseconds& m, const ParamValues& v, ParamId id) {
  m = std::chrono::microseconds(static_cast<int64_t>(v.getDouble(id) * 1000.0));
}
void mebibytes(std::size_t& m, const ParamValues& v, ParamId id) {
  m = static_cast<std::size_t>(v.getInt(id)) << 20;
}
// A variable that turns something off fills a member that says it is on.
void negated(bool& m, const ParamValues& v, ParamId id) { m = v.getInt(id) == 0; }
void isNccl(bool& m, const ParamValues& v, ParamId id) { m = v.getString(id) == "nccl"; }

// HVD_CHECK_REPLICAS: off -1, first 0, every:N N.
void checkReplicas(int& m, const ParamValues& v, ParamId id) {
  const std::string& text = v.getString(id);
  const std::string prefix = "every:";
  m = text == "off" ? -1 : 0;
  if (text == "off" || text == "first") return;
  if (text.rfind(prefix, 0) == 0) {
    const std::string digits = text.substr(prefix.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), m);
    if (ec == std::errc() && end == digits.data() + digits.size() && m > 0) return;
  }
  throw InvalidArgument(detail::concat(params::envName(id), "='", text,
                                       "': expected off, first or every:N with N >= 1"));
}

// One set of "0,1;2,3": sorted, without duplicates, each rank within [0, size).
std::vector<int32_t> parseProcessSet(const std::string& item, int64_t size, ParamId id) {
  std::vector<int32_t> ranks;
  std::size_t p = 0;
  while (p <= item.size()) {
    auto comma = item.find(',', p);
    std::string token = item.substr(p, comma == std::string::npos ? comma : comma - p);
    ranks.push_back(static_cast<int32_t>(
        params::parseInt(token, 0, size - 1, params::envName(id) + " rank '" + token + "'")));
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw InvalidArgument(params::envName(id) + ": set '" + item + "' names a rank twice");
  return ranks;
}

// HVD_PROCESS_SETS: "0,1;2,3" -> {{0,1},{2,3}}.
void processSets(std::vector<std::vector<int32_t>>& m, const ParamValues& v, ParamId id) {
  const std::string& text = v.getString(id);
  m.clear();
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    auto end = text.find(';', start);
    m.push_back(parseProcessSet(text.substr(start, end == std::string::npos ? end : end - start),
                                v.getInt(ParamId::Size), id));
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

// HVD_NETWORK_MODEL: the file's model, or the built-in one. Ranks per host are the job's, set
// once every rank agreed on the layout (connectWorld).
void networkModel(std::shared_ptr<const collectives::NetworkModel>& m, const ParamValues& v,
                  ParamId id) {
  const std::string& path = v.getString(id);
  collectives::NetworkModel model;
  if (!path.empty())
    model = collectives::NetworkModel::fromFile(path, params::envName(id) + "=" + path);
  m = std::make_shared<const collectives::NetworkModel>(model);
}

}  // namespace

std::string machineNetworkModelPath() {
  std::string dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::string(home) + "/.cache";
  else
    return "";
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return dir + "/hvd/network_model-" + host + ".json";
}

collectives::NetworkModel loadHostCalibration(const std::string& path) {
  try {
    return collectives::NetworkModel::fromFile(
        path, "this host's calibration " + path + " (hvd-bench calibrate)");
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string(e.what()) +
                          " (run hvd-bench calibrate again, or remove the file)");
  }
}

void fillFromTable(Config& c, const ParamValues& v) {
#define HVD_PARAM(Id, member, how, ...) how(c.member, v, ParamId::Id);
#define HVD_LAUNCHER_PARAM(id, ...)
#define HVD_OPTION(Id, Tag, type, member, how, ...) \
  how(c.HVD_OPTION_PATH_##Tag.member, v, ParamId::Id);
#include "common/param_rows.h"
#undef HVD_PARAM
#undef HVD_LAUNCHER_PARAM
#undef HVD_OPTION
}

}  // namespace hvd::runtime
