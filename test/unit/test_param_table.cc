// The parameter table (common/param_table.h) and what is derived from it: hvdrun's flags
// (launcher/param_flags.h), the config file's keys and the variables both set
// (launcher/runtime_flags.h).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/param_docs.h"
#include "common/params.h"
#include "launcher/command_line.h"
#include "launcher/runtime_flags.h"

using namespace hvd::params;
using hvd::launcher::CommandLine;

namespace {

// hvdrun's command line parsed as main() does, then the variables it gives the workers.
CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hvdrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CommandLine cl;
  int status =
      hvd::launcher::parseCommandLine(static_cast<int>(argv.size()), argv.data(), "test", cl);
  REQUIRE(status == -1);
  return cl;
}

std::map<std::string, std::string> variablesFrom(std::vector<std::string> args) {
  return hvd::launcher::runtimeParams(parse(std::move(args)).runtime);
}

// A value the row accepts, as typed on the command line or in the JSON file, and the variable's
// text it becomes.
struct Sample {
  std::string typed, json, variable;
};
Sample sampleFor(const ParamSpec& p, ValueKind kind) {
  switch (kind) {
    case ValueKind::Integer:
      return {p.defaultValue, p.defaultValue, p.defaultValue};
    case ValueKind::Number:
      return {"0.5", "0.5", "0.5"};
    case ValueKind::Megabytes:
      return {"2", "2", "2097152"};
    case ValueKind::Switch:
      return {"", "true", "1"};
    case ValueKind::NegatedSwitch:
      return {"", "false", "1"};
    case ValueKind::LogLevel:
      return {"WARNING", "\"warning\"", "warn"};
    default:
      break;
  }
  std::string text = p.choices.empty() ? "some-file" : p.choices.back();
  if (p.id == ParamId::CheckReplicas) text = "every:3";
  return {text, "\"" + text + "\"", text};
}

// What a parameter needs beside it to be valid (checkCombinations).
std::vector<std::string> prerequisiteFlags(ParamId id) {
  if (id == ParamId::AutotuneLog) return {"--autotune"};
  if (id == ParamId::TimelineMarkCycles) return {"--timeline-filename", "t.json"};
  return {};
}

}  // namespace

TEST_CASE("the table's rows are in ParamId order, and names, flags and keys are unique") {
  std::set<std::string> names, flags, keys;
  std::size_t index = 0;
  for (const auto& p : allParams()) {
    INFO(p.name);
    CHECK(static_cast<std::size_t>(p.id) == index++);
    CHECK(names.insert(p.name).second);
    if (!p.horovodAlias.empty()) CHECK(names.insert(p.horovodAlias).second);
    for (const auto& f : flagSpellings(p.flag)) CHECK(flags.insert(f).second);
    if (!p.configKey.key.empty()) CHECK(keys.insert(std::string(p.configKey.key)).second);
    // Switches set 0 or 1; MB become an integer of bytes.
    if (p.flag.kind == ValueKind::Switch || p.configKey.kind == ValueKind::Switch)
      CHECK((p.type == ParamType::Int && p.min == 0 && p.max == 1));
    if (p.flag.kind == ValueKind::Megabytes) CHECK(p.type == ParamType::Int);
    CHECK(p.flag.kind != ValueKind::NegatedSwitch);  // no command-line form
    if (!p.choices.empty()) CHECK(p.type == ParamType::String);
  }
}

TEST_CASE("every flag for the workers sets its variable as the table converts it") {
  for (const auto& p : allParams()) {
    if (p.flag.names.empty() || p.flag.target != FlagTarget::Workers) continue;
    INFO(p.name);
    Sample s = sampleFor(p, p.flag.kind);
    std::vector<std::string> args = prerequisiteFlags(p.id);
    args.push_back(flagSpellings(p.flag).front());
    if (!s.typed.empty()) args.push_back(s.typed);
    CHECK(variablesFrom(args).at(p.name) == s.variable);
  }
}

TEST_CASE("every config-file key sets its variable as the table converts it") {
  const std::string path = "param_table_test_config.json";
  for (const auto& p : allParams()) {
    if (p.configKey.key.empty()) continue;
    INFO(p.name);
    Sample s = sampleFor(p, p.configKey.kind);
    std::string key(p.configKey.key);
    auto dot = key.find('.');
    {
      std::ofstream out(path);
      out << "{\"" << key.substr(0, dot) << "\": {\"" << key.substr(dot + 1) << "\": " << s.json
          << "}}";
    }
    std::vector<std::string> args = prerequisiteFlags(p.id);
    args.insert(args.end(), {"--config-file", path});
    CHECK(variablesFrom(args).at(p.name) == s.variable);
  }
  std::remove(path.c_str());
}

TEST_CASE("horovodrun's spellings and no- forms, and the flags hvdrun acts on itself") {
  CHECK(variablesFrom({"--tcp"}).at(envName(ParamId::Transport)) == "tcp");
  CHECK(
      variablesFrom({"--no-hierarchical-allreduce"}).at(envName(ParamId::HierarchicalAllreduce)) ==
      "0");
  CommandLine cl =
      parse({"--start-timeout", "45", "--ssh-concurrency", "7", "--elastic-timeout", "90"});
  CHECK(cl.launch.startTimeout == std::chrono::seconds(45));
  CHECK(cl.launch.ssh.concurrency == 7);
  CHECK(cl.launch.elastic.timeout == std::chrono::seconds(90));
  CHECK(cl.launch.elastic.timeoutGiven);
  // hvdrun exports these itself (launcher.cc, elastic_strategy.cc), so runtimeParams leaves
  // them out.
  CHECK(hvd::launcher::runtimeParams(cl.runtime).empty());
  CommandLine defaults = parse({});
  CHECK(defaults.launch.startTimeout == std::chrono::seconds(30));
  CHECK_FALSE(defaults.launch.elastic.timeoutGiven);
}

TEST_CASE("a two-value flag takes two values, also as the last flag before the command") {
  // horovodrun's usual order: the command right after --blacklist-cooldown-range MIN MAX.
  CommandLine last = parse({"--min-np", "1", "--host-discovery-script", "./d.sh",
                            "--blacklist-cooldown-range", "2", "8", "python", "train.py", "-x"});
  CHECK(last.launch.elastic.cooldownRange == std::vector<int>{2, 8});
  CHECK(last.launch.command == std::vector<std::string>{"python", "train.py", "-x"});
  CommandLine before = parse({"--blacklist-cooldown-range", "5", "6", "-np", "1", "true"});
  CHECK(before.launch.elastic.cooldownRange == std::vector<int>{5, 6});
  CHECK(before.launch.np == 1);
}

TEST_CASE("horovodrun's usual command lines parse, and the command after them stays whole") {
  // The orders horovodrun's users write: flags of every kind before the command, values after
  // their flags, the script's own arguments after it.
  const std::vector<std::vector<std::string>> lines = {
      {"-np", "4", "-H", "localhost:4"},
      {"-np", "16", "-H", "server1:4,server2:4,server3:4,server4:4"},
      {"-np", "4", "-hostfile", "myhostfile"},
      {"-np", "4", "--hostfile", "myhostfile"},
      {"-np", "2", "-p", "12345", "-H", "host1:1,host2:1"},
      {"-np", "8", "--min-np", "4", "--max-np", "12", "--host-discovery-script", "./d.sh"},
      {"-np", "4", "--min-np", "2", "--max-np", "4", "--elastic-timeout", "600", "--reset-limit",
       "3", "--host-discovery-script", "./d.sh", "--blacklist-cooldown-range", "10", "100"},
      {"--verbose", "--log-level", "DEBUG", "-np", "2"},
      {"-np", "2", "--gloo", "--network-interface", "eth0", "--disable-cache"},
      {"-np", "4", "--fusion-threshold-mb", "32", "--cycle-time-ms", "3.5", "--cache-capacity",
       "1024"},
      {"-np", "4", "--timeline-filename", "/tmp/tl.json", "--timeline-mark-cycles"},
      {"-np", "4", "--autotune", "--autotune-log-file", "/tmp/a.csv"},
      {"-np", "2", "--hierarchical-allreduce", "--hierarchical-allgather", "--no-stall-check"},
      {"-np", "2", "--start-timeout", "60", "--output-filename", "/tmp/out"},
      {"-np", "2", "-x", "NCCL_DEBUG=INFO", "-x", "PATH"},
  };
  const std::vector<std::string> command = {"python", "train.py", "--epochs", "3", "-np", "9"};
  for (auto line : lines) {
    std::string text;
    for (const auto& word : line) text += word + " ";
    INFO(text);
    line.insert(line.end(), command.begin(), command.end());
    CHECK(parse(line).launch.command == command);
  }
}

TEST_CASE("the doc table has a row per parameter, and --print-config shows what sets each") {
  auto rows = envDocTable();
  CHECK(rows.size() == allParams().size() + 2);
  CHECK(rows[2].rfind("| `HVD_RANK` | `HOROVOD_RANK` |", 0) == 0);
  std::string all = describeAll(ParamValues::fromMap({}));
  CHECK(all.find("set by hvdrun's --fusion-threshold-mb, params.fusion_threshold_mb\n") !=
        std::string::npos);
  CHECK(all.find("read into Config::engine.coordinator.fusionThresholdBytes\n") !=
        std::string::npos);
}
