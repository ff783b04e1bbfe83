#include "launcher/hostfile.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/params.h"

namespace hvd::launcher {

std::vector<HostSlots> parseHostfile(const std::string& text, const std::string& path) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host, token;
    if (!(words >> host)) continue;
    std::string where = detail::concat(path, ":", number);
    HostSlots entry{host, 1};
    bool slotsGiven = false;
    while (words >> token) {
      const std::string key = "slots=";
      if (token.rfind(key, 0) == 0 || token.rfind("max_slots=", 0) == 0) {
        if (token.rfind(key, 0) != 0) continue;  // max_slots is MPI's cap; slots decides here
        if (slotsGiven)
          throw InvalidArgument(where + ": '" + token + "': slots given twice for host '" + host +
                                "'");
        slotsGiven = true;
        entry.slots = static_cast<int>(params::parseInt(token.substr(key.size()), 1, 1 << 20,
                                                        where + ": '" + token + "': slots"));
      } else {
        throw InvalidArgument(where + ": unexpected token '" + token + "' (write: host slots=N)");
      }
    }
    if (!seen.insert(entry.host).second)
      throw InvalidArgument(where + ": host '" + entry.host +
                            "' is listed twice (give it once with the total slot count)");
    hosts.push_back(entry);
  }
  if (hosts.empty()) throw InvalidArgument(path + ": the hostfile lists no hosts");
  return hosts;
}

std::vector<HostSlots> loadHostfile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InvalidArgument("--hostfile " + path + ": is a directory, not a hostfile");
  std::ifstream file(path);
  if (!file) throw InvalidArgument("--hostfile " + path + ": cannot read the file");
  std::stringstream text;
  text << file.rdbuf();
  return parseHostfile(text.str(), path);
}

}  // namespace hvd::launcher
