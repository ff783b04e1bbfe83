#include "launcher/command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "common/params.h"
#include "launcher/param_flags.h"
#include "launcher/ssh/host_key_policy.h"

namespace hvd::launcher {
namespace {

// The app's options, its option groups' too. Read from the app itself, so that a new option
// cannot be forgotten.
std::vector<const CLI::Option*> allOptions(const CLI::App& app) {
  std::vector<const CLI::App*> apps{&app};
  for (const CLI::App* group :
       app.get_subcommands([](const CLI::App* a) { return a->get_name().empty(); }))
    apps.push_back(group);
  std::vector<const CLI::Option*> out;
  for (const CLI::App* a : apps)
    for (const CLI::Option* opt : a->get_options()) out.push_back(opt);
  return out;
}

// An option's names as typed: "-n", "--num-proc" (a negated flag's "--no-x" too).
std::vector<std::string> optionNames(const CLI::Option& opt) {
  std::vector<std::string> out;
  for (const auto& name : opt.get_snames()) out.push_back("-" + name);
  for (const auto& name : opt.get_lnames()) out.push_back("--" + name);
  return out;
}

// How many values each option takes after its name: 0 for a flag.
std::map<std::string, int> valueCounts(const CLI::App& app) {
  std::map<std::string, int> out;
  for (const CLI::Option* opt : allOptions(app))
    for (const auto& name : optionNames(*opt))
      out[name] = std::max(0, opt->get_items_expected_min());
  return out;
}

// mpirun's and horovodrun's single-dash spellings of hvdrun's long options.
const std::map<std::string, std::string> kLongForms = {
    {"-np", "--num-proc"}, {"-hostfile", "--hostfile"}, {"-cb", "--check-build"}};

// --print-flags: per option, every name it is accepted as (the single-dash spellings above
// included), a tab and its help text. scripts/check_cli_doc.py checks docs/cli.md against it.
void printFlags(const CLI::App& app) {
  std::set<std::string> printed;  // each option group has a copy of -h,--help
  for (const CLI::Option* opt : allOptions(app)) {
    std::string line;
    for (const auto& name : optionNames(*opt)) {
      line += (line.empty() ? "" : " ") + name;
      for (const auto& [alias, longForm] : kLongForms)
        if (longForm == name) line += " " + alias;
    }
    line += "\t" + opt->get_description();
    if (printed.insert(line).second) std::printf("%s\n", line.c_str());
  }
}

// CLI11 accepts only one-letter names after a single dash, but mpirun and horovodrun users type
// -np, -hostfile and -cb (CLI11 would read -hostfile as -h and print the help). Rewrite them in
// hvdrun's own options, stopping at the command so the command's arguments stay untouched.
std::vector<std::string> normaliseArgs(int argc, char** argv, const CLI::App& app) {
  const std::map<std::string, int> values = valueCounts(app);
  std::vector<std::string> args(argv, argv + argc);
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].empty() || args[i][0] != '-' || args[i] == "--") break;
    if (auto it = kLongForms.find(args[i]); it != kLongForms.end()) args[i] = it->second;
    if (auto it = values.find(args[i]); it != values.end())
      i += static_cast<std::size_t>(it->second);
  }
  return args;
}

// The parameter flags hvdrun acts on itself (FlagTarget::Launcher) as launch options.
void applyLauncherFlags(const std::map<params::ParamId, FlagValue>& given, LaunchOptions& o) {
  auto number = [&](params::ParamId id) {
    auto it = given.find(id);
    return it != given.end() ? std::get<long long>(it->second)
                             : std::stoll(params::spec(id).defaultValue);
  };
  o.startTimeout = std::chrono::seconds(number(params::ParamId::StartTimeout));
  o.elastic.timeout = std::chrono::seconds(number(params::ParamId::ElasticTimeout));
  o.elastic.timeoutGiven = given.count(params::ParamId::ElasticTimeout) > 0;
  if (given.count(params::ParamId::ElasticHostFailureLimit))
    o.elastic.hostFailureLimit = static_cast<int>(number(params::ParamId::ElasticHostFailureLimit));
  if (auto it = given.find(params::ParamId::ElasticRequireProgress); it != given.end())
    o.elastic.requireProgress = std::get<bool>(it->second);
  if (auto it = given.find(params::ParamId::ElasticCommitDir); it != given.end())
    o.elastic.commitDir = std::get<std::string>(it->second);
  if (auto it = given.find(params::ParamId::LaunchAgent); it != given.end())
    o.launchAgent = std::get<std::string>(it->second);
  // 0: not given; sshConcurrency() then reads the variable from hvdrun's environment.
  if (given.count(params::ParamId::SshConcurrency))
    o.ssh.concurrency = static_cast<int>(number(params::ParamId::SshConcurrency));
}

// Flags whose values become launch options once parsing is done.
struct RawFlags {
  int grace = 10;
  int connectTimeout = 0;
  std::string strictHostKeys;
  bool noHostKeyCheck = false;
};

// Ranks, hosts, output and the network: the options every job may need.
void addJobOptions(CLI::App& app, LaunchOptions& o, RawFlags& raw) {
  app.add_option("-n,--num-proc", o.np,
                 "Number of ranks to start (default inside Slurm: the allocation's task count)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            long long n = 0;
            try {
              n = std::stoll(value);
            } catch (const std::exception&) {
              return "";  // CLI11's conversion reports what is not a number
            }
            return n >= 1 ? "" : "must be at least 1, got " + value;
          },
          "N >= 1"));
  app.add_option("-H,--hosts", o.hosts,
                 "Hosts and slots, host:slots[,host:slots] (default localhost:N)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            return value.find_first_not_of(" \t,") == std::string::npos
                       ? "the host list is empty (give host:slots[,host:slots])"
                       : "";
          },
          "HOSTS"));
  app.add_option("--hostfile", o.hostfile, "Hosts from a file of 'host slots=N' lines");
  app.add_option("--grace-seconds", raw.grace,
                 "Seconds between SIGTERM and SIGKILL when the job is stopped")
      ->check(CLI::Range(0, 3600));
  app.add_option("--output-filename", o.outputDir,
                 "Also write each rank's output to DIR/rank.NN/{stdout,stderr}");
  app.add_option("-x", o.exports, "Export VAR (from hvdrun's environment) or VAR=VALUE to workers")
      ->allow_extra_args(false);
  app.add_flag("--prefix-timestamp", o.prefixTimestamp,
               "Start each forwarded output line with the local date and time hvdrun received "
               "it");
  app.add_flag("--verbose", o.verbose,
               "Print what hvdrun does, incl. the address chosen per host (never the job secret)");
  app.add_option("--network-interface", o.networkInterface,
                 "Interface for the rendezvous and data plane: IFACE, or host=IFACE,... per "
                 "host (default: the address that reaches hvdrun)");
}

CLI::App* addSshOptions(CLI::App& app, LaunchOptions& o, RawFlags& raw) {
  raw.connectTimeout = static_cast<int>(o.ssh.connectTimeout.count());
  auto* group = app.add_option_group("SSH", "How hvdrun reaches remote hosts (libssh2)");
  group
      ->add_option("-p,--ssh-port", o.ssh.port,
                   "SSH port of every remote host (default: ~/.ssh/config's Port, else 22)")
      ->check(CLI::Range(1, 65535));
  group->add_option("-i,--ssh-identity-file", o.ssh.identityFile,
                    "Private key tried first (then ssh-agent, ~/.ssh/config's IdentityFile, "
                    "~/.ssh/id_ed25519, id_ecdsa, id_rsa)");
  group
      ->add_option("--ssh-connect-timeout", raw.connectTimeout,
                   "Seconds to reach and authenticate with each host before the job is "
                   "refused")
      ->check(CLI::Range(1, 3600));
  group
      ->add_option("--ssh-strict-host-key-checking", raw.strictHostKeys,
                   "yes: refuse hosts known_hosts does not list; accept-new: record their "
                   "keys; no: check nothing (default: ~/.ssh/config's StrictHostKeyChecking, "
                   "else accept-new). Changed keys and keys of other types are refused "
                   "unless no")
      ->check(CLI::IsMember({"yes", "accept-new", "no"}));
  group->add_flag("--ssh-no-host-key-check", raw.noHostKeyCheck,
                  "Same as --ssh-strict-host-key-checking no (unsafe outside trusted "
                  "networks)");
  return group;
}

CLI::App* addElasticOptions(CLI::App& app, LaunchOptions& o) {
  auto* group =
      app.add_option_group("Elastic",
                           "Workers may fail or join while the job runs (hvd.elastic.run); any of "
                           "--min-np, --max-np or --host-discovery-script makes the job elastic");
  group
      ->add_option("--min-np", o.elastic.minNp,
                   "Fewest workers the job runs with; below that it waits for hosts "
                   "(default: -np)")
      ->check(CLI::Range(1, 1 << 20));
  group
      ->add_option("--max-np", o.elastic.maxNp,
                   "Most workers the job runs with (default: every offered slot)")
      ->check(CLI::Range(1, 1 << 20));
  group->add_option("--host-discovery-script", o.elastic.discoveryScript,
                    "Executable printing the usable hosts, one 'host[:slots]' per line; hvdrun "
                    "runs it every second");
  group
      ->add_option("--slots-per-host", o.elastic.slotsPerHost,
                   "Slots of a discovered host whose line gives none (default 1)")
      ->check(CLI::Range(1, 1 << 16));
  group
      ->add_option("--reset-limit", o.elastic.resetLimit,
                   "Fail the job instead of forming more than this many new rounds")
      ->check(CLI::Range(0, 1 << 30));
  group
      ->add_option("--blacklist-cooldown-range", o.elastic.cooldownRange,
                   "MIN MAX: a failed host comes back after MIN seconds, twice as long after "
                   "each further failure, at most MAX (default: never)")
      ->expected(2)
      ->allow_extra_args(false)  // a vector option takes more by default: the command's words
      ->check(CLI::Range(1, 86400));
  return group;
}

// Options that print something and exit, and horovodrun's that change nothing.
void addInfoOptions(CLI::App& app, CommandLine& out, bool& printFlagsGiven) {
  // horovodrun's controller choice and its cache of host checks: hvdrun always runs its own
  // TCP controller (what --gloo picks) and caches nothing, so both are accepted and change nothing.
  auto* compat = app.add_option_group("horovodrun", "Accepted from horovodrun, no effect in hvd");
  compat->add_flag("--gloo")->description(
      "hvdrun always runs its own controller over TCP, as Gloo's");
  compat->add_flag("--disable-cache")->description("hvdrun caches no host checks");
  app.add_flag("--print-config", out.printConfig,
               "List every HVD_* parameter with its default, range and current value, then exit");
  app.add_flag("--print-env-doc", out.printEnvDoc,
               "Print the table of parameters in docs/environment.md (Markdown), then exit");
  app.add_flag("--check-build", out.checkBuild,
               "Show what this build supports (CUDA, NCCL), what this machine offers it (driver, "
               "devices, NCCL library) and what the workers' python3 finds (hvd, PyTorch, "
               "NumPy), then exit; status 1 when python3 cannot import hvd");
  app.add_flag("--print-flags", printFlagsGiven,
               "List every option's names and help, one option a line, then exit (for "
               "scripts/check_cli_doc.py)")
      ->group("");  // not in --help
}

// The command after hvdrun's options. False when it starts with an option hvdrun lacks (printed).
bool takeCommand(CLI::App& app, LaunchOptions& o) {
  o.command = app.remaining();
  // An option hvdrun lacks (horovodrun's --mpi, a typo) would otherwise be taken
  // for the command and fail as "command not found".
  if (!o.command.empty() && o.command.front().size() > 1 && o.command.front()[0] == '-' &&
      o.command.front() != "--") {
    const std::string& option = o.command.front();
    // horovodrun's MPI controller: hvd has none, and its own is what --gloo picks.
    if (option == "--mpi" || option.rfind("--mpi-args", 0) == 0) {
      std::fprintf(stderr,
                   "hvdrun: error: unknown option '%s': hvd has no MPI controller; it runs its "
                   "own over TCP (what horovodrun's --gloo picks), so leave it out\n",
                   option.c_str());
      return false;
    }
    std::fprintf(stderr,
                 "hvdrun: error: unknown option '%s' (hvdrun --help lists them; a command "
                 "that starts with '-' goes after --)\n",
                 option.c_str());
    return false;
  }
  // `hvdrun -np 2 -- python train.py`: the separator ends hvdrun's options, as in mpirun; a later
  // one belongs to the command.
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());
  return true;
}

// The raw flags as launch options; false (printed) when the two host key flags contradict each
// other.
bool applyRawFlags(const RawFlags& raw, LaunchOptions& o) {
  o.grace = std::chrono::seconds(raw.grace);
  o.ssh.connectTimeout = std::chrono::seconds(raw.connectTimeout);
  if (!raw.strictHostKeys.empty())
    o.ssh.hostKeyPolicy = ssh::parseHostKeyPolicy(raw.strictHostKeys);
  if (raw.noHostKeyCheck) {
    if (o.ssh.hostKeyPolicy && *o.ssh.hostKeyPolicy != ssh::HostKeyPolicy::Off) {
      std::fprintf(stderr,
                   "hvdrun: error: --ssh-no-host-key-check means --ssh-strict-host-key-checking "
                   "no, but --ssh-strict-host-key-checking %s was given too\n",
                   raw.strictHostKeys.c_str());
      return false;
    }
    o.ssh.hostKeyPolicy = ssh::HostKeyPolicy::Off;
  }
  return true;
}

}  // namespace

int parseCommandLine(int argc, char** argv, const std::string& version, CommandLine& out) {
  LaunchOptions& o = out.launch;
  CLI::App app{"hvdrun: start a data-parallel job of N ranks and forward their output", "hvdrun"};
  app.set_version_flag("--version", "hvdrun " + version);
  RawFlags raw;
  addJobOptions(app, o, raw);
  CLI::App* sshGroup = addSshOptions(app, o, raw);
  CLI::App* elastic = addElasticOptions(app, o);
  auto* tuning = app.add_option_group("Runtime", "Engine knobs, exported to workers as HVD_*");
  ParamFlags paramFlags;
  paramFlags.addTo({{params::FlagGroup::Main, &app},
                    {params::FlagGroup::Ssh, sshGroup},
                    {params::FlagGroup::Elastic, elastic},
                    {params::FlagGroup::Runtime, tuning}});
  tuning->add_option("--config-file", out.runtime.configFile,
                     "JSON file with Horovod's config sections (params, autotune, timeline, "
                     "stall_check, logging); flags override it");
  bool printFlagsGiven = false;
  addInfoOptions(app, out, printFlagsGiven);
  app.prefix_command();  // everything from the command on belongs to the command
  app.footer("Usage: hvdrun -np N [-H host:slots,...] [options] command [args...]");

  try {
    std::vector<std::string> args = normaliseArgs(argc, argv, app);
    std::reverse(args.begin(), args.end());
    args.pop_back();  // program name
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // CLI11 has a code per kind of error (105 for a value out of range); hvdrun's users get
    // one: 2, a bad command line (docs/cli.md). --help and --version exit 0.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (printFlagsGiven) {
    printFlags(app);
    return 0;
  }
  if (!takeCommand(app, o)) return 2;
  out.runtime.given = paramFlags.given();
  applyLauncherFlags(out.runtime.given, o);
  return applyRawFlags(raw, o) ? -1 : 2;
}

}  // namespace hvd::launcher
