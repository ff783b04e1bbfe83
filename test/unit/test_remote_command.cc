#include <catch2/catch.hpp>

#include "launcher/ssh/remote_command.h"

using namespace hvd::launcher::ssh;

TEST_CASE("forwarded environment drops the remote login's and machine's variables") {
  Environment env{{"PATH", "/usr/bin"},
                  {"HVD_RANK", "3"},
                  {"PYTHONPATH", "/p"},
                  {"LD_LIBRARY_PATH", "/l"},
                  {"HOME", "/root"},
                  {"USER", "me"},
                  {"CUDA_VISIBLE_DEVICES", "0"},
                  {"BASH_FUNC_f%%", "() { :; }"},
                  {"OLDPWD", "/x"},
                  {"SSH_AUTH_SOCK", "/tmp/agent"},
                  {"MY_TOKEN", "t"},
                  {"SSH_CONNECTION", "1 2 3 4"},
                  {"bad-name", "v"}};
  auto out = forwardedEnvironment(env);
  CHECK(out == Environment{{"PATH", "/usr/bin"},
                           {"HVD_RANK", "3"},
                           {"PYTHONPATH", "/p"},
                           {"LD_LIBRARY_PATH", "/l"},
                           {"MY_TOKEN", "t"}});
}

TEST_CASE("shell quoting keeps every byte in one word") {
  CHECK(shellQuote("plain") == "'plain'");
  CHECK(shellQuote("it's") == "'it'\\''s'");
  CHECK(shellQuote("") == "''");
  CHECK(shellQuote("$HOME `x` \"q\"\n") == "'$HOME `x` \"q\"\n'");
}

TEST_CASE("the bootstrap command line carries nothing of the job") {
  RemoteRun run{"node1",
                "/work dir",
                {{"HVD_SECRET", "s3cr3t"}, {"PATH", "/bin"}},
                {"python3", "train.py", "--lr=0.1"},
                "",
                5,
                ""};
  std::string script = runScript(run);
  CHECK(bootstrapCommand().find("s3cr3t") == std::string::npos);
  CHECK(bootstrapCommand().find("train.py") == std::string::npos);
  CHECK(script.find("HVD_SECRET='s3cr3t'; export HVD_SECRET") != std::string::npos);
  CHECK(script.find("cd ") == std::string::npos);  // the check script's shell did that
  CHECK(checkScript(run).find("cd '/work dir'") != std::string::npos);
  CHECK(script.find("setsid 'python3' 'train.py' '--lr=0.1' </dev/null") != std::string::npos);
  CHECK(script.find("sleep 5; kill -KILL -$pid") != std::string::npos);
  CHECK(framed(script).rfind(std::to_string(script.size()) + "\n", 0) == 0);
}

TEST_CASE("the run script removes the job's segments of ranks that are gone, when asked") {
  RemoteRun run{"node1", "/w", {}, {"python3", "train.py"}, "", 5, "hvd-0a1b"};
  std::string s = runScript(run);
  auto cleanup = s.find("for f in '/dev/shm/hvd-0a1b-'*; do");
  REQUIRE(cleanup != std::string::npos);
  CHECK(cleanup > s.find("wait $pid"));
  CHECK(s.find("kill -0 \"$p\" 2>/dev/null && continue") != std::string::npos);
  CHECK(s.find("'hvdrun: node1: removed' \"$n\"") != std::string::npos);
  CHECK(s.rfind("exit $rc\n") == s.size() - std::string("exit $rc\n").size());
  run.shmSegmentPrefix.clear();
  CHECK(runScript(run).find("/dev/shm") == std::string::npos);
}

TEST_CASE("the check script names the host and what is missing") {
  RemoteRun run{"node1", "/w", {{"PATH", "/bin"}}, {"python3", "train.py"}, "ib0", 5, ""};
  std::string s = checkScript(run);
  CHECK(s.find("command -v 'python3'") != std::string::npos);
  CHECK(s.find("'node1: python3: not found'") != std::string::npos);
  CHECK(s.find("[ -e 'train.py' ] || { echo 'node1: train.py: not found'") != std::string::npos);
  CHECK(s.find("/sys/class/net/'ib0'") != std::string::npos);
  CHECK(s.find("setsid") == std::string::npos);
  // Then it says so and waits for the run script in the same shell; no run script, no rank.
  CHECK(s.find(std::string("echo ") + kReadyLine + "\nIFS= read -r n") != std::string::npos);
  CHECK(s.find("|| exit 0\n") != std::string::npos);
  RemoteRun absolute{"n", "/w", {}, {"/opt/py/bin/python", "-c", "x"}, "", 5, ""};
  CHECK(checkScript(absolute).find("[ -x '/opt/py/bin/python' ]") != std::string::npos);
}
