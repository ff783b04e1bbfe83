// Fuzzes the ssh_config parser (launcher/ssh/ssh_config.h): the first line is the host looked
// up, the rest the config text. Any text gives settings or an InvalidArgument naming the file;
// the Host pattern matcher is exercised on every pattern-host pair the input spells.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "launcher/ssh/ssh_config.h"

using namespace hvd::launcher::ssh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto newline = input.find('\n');
  const std::string host = input.substr(0, newline);
  const std::string text = newline == std::string::npos ? "" : input.substr(newline + 1);
  (void)hostPatternMatches(text.substr(0, text.find('\n')), host);
  try {
    SshHostConfig c = lookupSshConfig(text, "fuzz_config", host, "/home/fuzz");
    if (c.port && (*c.port < 1 || *c.port > 65535)) abort();
  } catch (const hvd::InvalidArgument& e) {
    if (std::string(e.what()).find("fuzz_config") == std::string::npos) abort();
  }
  return 0;
}
