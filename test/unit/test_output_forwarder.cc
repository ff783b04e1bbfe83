#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "launcher/output_forwarder.h"

using namespace hvd::launcher;

namespace {

// Reads everything written to a pipe's read end so far.
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  return out;
}

struct Pipes {
  int out[2], err[2];
  Pipes() {
    REQUIRE(::pipe2(out, O_NONBLOCK) == 0);
    REQUIRE(::pipe2(err, O_NONBLOCK) == 0);
    for (int fd : {out[1], err[1]}) ::fcntl(fd, F_SETPIPE_SZ, 1 << 20);  // hold a long line
  }
  ~Pipes() {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
  }
};

}  // namespace

TEST_CASE("partial lines are joined and each line is prefixed once") {
  Pipes p;
  OutputForwarder f(2, p.out[1], p.err[1], "");
  f.onData(0, Stream::Stdout, "hel", 3);
  f.onData(1, Stream::Stdout, "other rank\nand ", 15);
  f.onData(0, Stream::Stdout, "lo\nworld\npart", 13);
  f.onData(1, Stream::Stderr, "oops\n", 5);
  CHECK(drain(p.out[0]) == "[1]<stdout>:other rank\n[0]<stdout>:hello\n[0]<stdout>:world\n");
  CHECK(drain(p.err[0]) == "[1]<stderr>:oops\n");
  f.onEnd(0, Stream::Stdout);
  f.onEnd(1, Stream::Stdout);
  CHECK(drain(p.out[0]) == "[0]<stdout>:part\n[1]<stdout>:and \n");
}

TEST_CASE("with timestamps each line starts with the local date and time it was forwarded") {
  Pipes p;
  OutputForwarder f(2, p.out[1], p.err[1], "", true);
  std::time_t before = std::time(nullptr);
  f.onData(1, Stream::Stdout, "one\ntw", 6);
  f.onData(1, Stream::Stdout, "o\n", 2);
  f.onData(0, Stream::Stderr, "err\n", 4);
  std::time_t after = std::time(nullptr);
  std::string out = drain(p.out[0]), err = drain(p.err[0]);
  std::regex line(R"((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.\d{3} \[1\]<stdout>:(one|two)\n)");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, line));
  CHECK(m.position(0) == 0);
  // The stamp is this machine's local time of the call, to the second.
  auto localText = [](std::time_t t) {
    std::tm local{};
    ::localtime_r(&t, &local);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
    return std::string(text);
  };
  CHECK((m.str(1) >= localText(before) && m.str(1) <= localText(after)));
  CHECK(std::regex_match(out, std::regex(R"((\S+ \S+ \[1\]<stdout>:(one|two)\n){2})")));
  CHECK(std::regex_match(err, std::regex(R"(\S+ \S+ \[0\]<stderr>:err\n)")));
  CHECK(f.lastStderrLines(0) == std::vector<std::string>{"err"});  // the summary keeps no stamp
}

TEST_CASE("a progress bar's carriage returns forward each redraw as it comes") {
  Pipes p;
  OutputForwarder f(2, p.out[1], p.err[1], "");
  // tqdm's pattern: '\r' then the bar, one write per redraw, a newline when it closes.
  f.onData(1, Stream::Stderr, "\r 10%", std::strlen("\r 10%"));
  CHECK(drain(p.err[0]).empty());  // the bar is not known to be complete yet
  f.onData(1, Stream::Stderr, "\r 50%", std::strlen("\r 50%"));
  CHECK(drain(p.err[0]) == "[1]<stderr>: 10%\r");
  f.onData(1, Stream::Stderr, "\r100%\n", std::strlen("\r100%\n"));
  CHECK(drain(p.err[0]) == "[1]<stderr>: 50%\r[1]<stderr>:100%\n");
  // The other style redraws with a trailing '\r', held until the next byte: "\r\n" is a
  // line end (kept as before), anything else a redraw.
  f.onData(0, Stream::Stdout, "a\r", std::strlen("a\r"));
  CHECK(drain(p.out[0]).empty());
  f.onData(0, Stream::Stdout, "\nb\r", std::strlen("\nb\r"));
  CHECK(drain(p.out[0]) == "[0]<stdout>:a\r\n");
  f.onData(0, Stream::Stdout, "c\r", std::strlen("c\r"));
  CHECK(drain(p.out[0]) == "[0]<stdout>:b\r");
  f.onEnd(0, Stream::Stdout);  // the stream's last redraw stays on the console
  CHECK(drain(p.out[0]) == "[0]<stdout>:c\n");
  f.onData(1, Stream::Stdout, "\r", 1);
  f.onEnd(1, Stream::Stdout);  // a lone '\r' adds nothing
  CHECK(drain(p.out[0]).empty());
}

TEST_CASE("a progress bar's redraws count as one of the kept stderr lines") {
  Pipes p;
  OutputForwarder f(1, p.out[1], p.err[1], "");
  std::string text = "context\n";
  for (int i = 0; i < 30; ++i) text += "\rstep " + std::to_string(i);
  text += "\nTraceback\n";
  f.onData(0, Stream::Stderr, text.data(), text.size());
  CHECK(f.lastStderrLines(0) == std::vector<std::string>{"context", "step 29", "Traceback"});
  drain(p.err[0]);
}

TEST_CASE("the last stderr lines of each rank are kept") {
  Pipes p;
  OutputForwarder f(1, p.out[1], p.err[1], "");
  std::string text;
  for (int i = 0; i < 15; ++i) text += "line " + std::to_string(i) + "\n";
  f.onData(0, Stream::Stderr, text.data(), text.size());
  auto last = f.lastStderrLines(0);
  REQUIRE(last.size() == OutputForwarder::kKeptStderrLines);
  CHECK(last.front() == "line 5");
  CHECK(last.back() == "line 14");
  drain(p.err[0]);
}

TEST_CASE("an endless line is forwarded in bounded pieces") {
  Pipes p;
  OutputForwarder f(1, p.out[1], p.err[1], "");
  std::string big(OutputForwarder::kMaxLineBytes + 10, 'x');
  f.onData(0, Stream::Stdout, big.data(), big.size());
  std::string out = drain(p.out[0]);
  CHECK(out.size() == 12 + OutputForwarder::kMaxLineBytes + 1);
  f.onEnd(0, Stream::Stdout);
  CHECK(drain(p.out[0]) == "[0]<stdout>:xxxxxxxxxx\n");
}

TEST_CASE("an output directory receives each rank's raw streams") {
  Pipes p;
  auto dir = std::filesystem::temp_directory_path() / ("hvd-fwd-" + std::to_string(::getpid()));
  {
    OutputForwarder f(3, p.out[1], p.err[1], dir.string());
    f.onData(2, Stream::Stdout, "a\nb", 3);
    f.onData(2, Stream::Stderr, "err\n", 4);
  }
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  CHECK(read(dir / "rank.02" / "stdout") == "a\nb");
  CHECK(read(dir / "rank.02" / "stderr") == "err\n");
  CHECK(std::filesystem::exists(dir / "rank.00" / "stdout"));
  std::filesystem::remove_all(dir);
  drain(p.out[0]);
  drain(p.err[0]);
}

TEST_CASE("a rank's file that cannot be written is said once, and the console keeps its lines") {
  // /dev/full behind the rank's file name: every write fails with ENOSPC, as on a full disk.
  Pipes p;
  auto dir = std::filesystem::temp_directory_path() / ("hvd-full-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "rank.00");
  std::filesystem::create_symlink("/dev/full", dir / "rank.00" / "stdout");
  {
    OutputForwarder f(1, p.out[1], p.err[1], dir.string());
    f.onData(0, Stream::Stdout, "one\n", 4);
    f.onData(0, Stream::Stdout, "two\n", 4);
    f.onData(0, Stream::Stderr, "err\n", 4);
    CHECK(drain(p.out[0]) == "[0]<stdout>:one\n[0]<stdout>:two\n");
    std::string err = drain(p.err[0]);
    std::string warning = "hvdrun: --output-filename: cannot write " +
                          (dir / "rank.00" / "stdout").string() +
                          ": No space left on device; rank 0's stdout goes on to this console "
                          "only\n";
    CHECK(err == warning + "[0]<stderr>:err\n");
  }
  std::ifstream in(dir / "rank.00" / "stderr");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "err\n");  // the other stream's file is still written
  std::filesystem::remove_all(dir);
}
