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
#include "launcher/ssh/host_key_policy.h"

namespace hvd::launcher {
namespace {

// How many values each of the app's options (its option groups' too) takes after its name: 0
// for a flag. Read from the app itself, so that a new option cannot be forgotten.
std::map<std::string, int> valueCounts(const CLI::App& app) {
  std::map<std::string, int> out;
  std::vector<const CLI::App*> apps{&app};
  for (const CLI::App* group : app.get_subcommands([](const CLI::App* a) {
         return a->get_name().empty();
       }))
    apps.push_back(group);
  for (const CLI::App* a : apps)
    for (const CLI::Option* opt : a->get_options()) {
      int count = std::max(0, opt->get_items_expected_min());
      for (const auto& name : opt->get_snames()) out["-" + name] = count;
      for (const auto& name : opt->get_lnames()) out["--" + name] = count;
    }
  return out;
}

// CLI11 accepts only one-letter names after a single dash, but mpirun and horovodrun users type
// -np, -hostfile and -cb (CLI11 would read -hostfile as -h and print the help). Rewrite them in
// hvdrun's own options, stopping at the command so the command's arguments stay untouched.
std::vector<std::string> normaliseArgs(int argc, char** argv, const CLI::App& app) {
  static const std::map<std::string, std::string> kLongForms = {
      {"-np", "--num-proc"}, {"-hostfile", "--hostfile"}, {"-cb", "--check-build"}};
  const std::map<std::string, int> values = valueCounts(app);
  std::vector<std::string> args(argv, argv + argc);
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].empty() || args[i][0] != '-' || args[i] == "--") break;
    if (auto it = kLongForms.find(args[i]); it != kLongForms.end()) args[i] = it->second;
    if (auto it = values.find(args[i]); it != values.end()) i += static_cast<std::size_t>(it->second);
  }
  return args;
}

}  // namespace

int parseCommandLine(int argc, char** argv, const std::string& version, CommandLine& out) {
  LaunchOptions& o = out.launch;
  CLI::App app{"hvdrun: start a data-parallel job of N ranks and forward their output", "hvdrun"};
  app.set_version_flag("--version", "hvdrun " + version);
  int startTimeout = static_cast<int>(
      hvd::params::parseInt(hvd::params::spec("HVD_START_TIMEOUT").defaultValue, 1, 86400,
                            "HVD_START_TIMEOUT"));
  int grace = 10;
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
  app.add_option("--start-timeout", startTimeout,
                 "Seconds workers wait for all peers to join (HVD_START_TIMEOUT)")
      ->check(CLI::Range(1, 86400));
  app.add_option("--grace-seconds", grace,
                 "Seconds between SIGTERM and SIGKILL when the job is stopped")
      ->check(CLI::Range(0, 3600));
  app.add_option("--output-filename", o.outputDir,
                 "Also write each rank's output to DIR/rank.NN/{stdout,stderr}");
  app.add_option("-x", o.exports, "Export VAR (from hvdrun's environment) or VAR=VALUE to workers")
      ->allow_extra_args(false);
  app.add_option("--log-level", o.logLevel,
                 "Log level of hvdrun and its workers: trace, debug, info, warn, error, "
                 "critical, off (or Horovod's WARNING, FATAL, any case)")
      ->transform(CLI::Validator(
          [](std::string& level) {
            try {
              level = hvd::log::canonicalLevel(level);
              return std::string();
            } catch (const hvd::InvalidArgument& e) {
              return std::string(e.what());
            }
          },
          "LEVEL"));
  app.add_flag("--log-hide-timestamp", out.logHideTime,
               "Leave the date and time out of hvd's log lines (HVD_LOG_HIDE_TIME=1)");
  app.add_flag("--prefix-timestamp", o.prefixTimestamp,
               "Start each forwarded output line with the local date and time hvdrun received "
               "it");
  app.add_flag("--horovod-compat", o.horovodCompat,
               "Let 'import horovod.torch as hvd' run on hvd: put hvd's horovod compatibility "
               "package on the workers' PYTHONPATH (HVD_HOROVOD_COMPAT=1)");
  app.add_flag("--verbose", o.verbose,
               "Print what hvdrun does, incl. the address chosen per host (never the job secret)");
  int connectTimeout = static_cast<int>(o.ssh.connectTimeout.count());
  auto* sshGroup = app.add_option_group("SSH", "How hvdrun reaches remote hosts (libssh2)");
  sshGroup->add_option("-p,--ssh-port", o.ssh.port,
                       "SSH port of every remote host (default: ~/.ssh/config's Port, else 22)")
      ->check(CLI::Range(1, 65535));
  sshGroup->add_option("-i,--ssh-identity-file", o.ssh.identityFile,
                       "Private key tried first (then ssh-agent, ~/.ssh/config's IdentityFile, "
                       "~/.ssh/id_ed25519, id_ecdsa, id_rsa)");
  sshGroup->add_option("--ssh-connect-timeout", connectTimeout,
                       "Seconds to reach and authenticate with each host before the job is "
                       "refused")
      ->check(CLI::Range(1, 3600));
  sshGroup->add_option("--ssh-concurrency", o.ssh.concurrency,
                       "Remote hosts to connect to and check at once; the others wait their "
                       "turn (HVD_SSH_CONCURRENCY, default " +
                           hvd::params::spec("HVD_SSH_CONCURRENCY").defaultValue + ")")
      ->check(CLI::Range(1, 4096));
  std::string strictHostKeys;
  bool noHostKeyCheck = false;
  sshGroup->add_option("--ssh-strict-host-key-checking", strictHostKeys,
                       "yes: refuse hosts known_hosts does not list; accept-new: record their "
                       "keys; no: check nothing (default: ~/.ssh/config's StrictHostKeyChecking, "
                       "else accept-new). Changed keys and keys of other types are refused "
                       "unless no")
      ->check(CLI::IsMember({"yes", "accept-new", "no"}));
  sshGroup->add_flag("--ssh-no-host-key-check", noHostKeyCheck,
                     "Same as --ssh-strict-host-key-checking no (unsafe outside trusted "
                     "networks)");
  app.add_option("--network-interface", o.networkInterface,
                 "Interface for the rendezvous and data plane: IFACE, or host=IFACE,... per "
                 "host (default: the address that reaches hvdrun)");
  int elasticTimeout = static_cast<int>(
      hvd::params::parseInt(hvd::params::spec("HVD_ELASTIC_TIMEOUT").defaultValue, 1, 86400,
                            "HVD_ELASTIC_TIMEOUT"));
  auto* elastic = app.add_option_group(
      "Elastic", "Workers may fail or join while the job runs (hvd.elastic.run); any of "
                 "--min-np, --max-np or --host-discovery-script makes the job elastic");
  elastic->add_option("--min-np", o.elastic.minNp,
                      "Fewest workers the job runs with; below that it waits for hosts "
                      "(default: -np)")
      ->check(CLI::Range(1, 1 << 20));
  elastic->add_option("--max-np", o.elastic.maxNp,
                      "Most workers the job runs with (default: every offered slot)")
      ->check(CLI::Range(1, 1 << 20));
  elastic->add_option("--host-discovery-script", o.elastic.discoveryScript,
                      "Executable printing the usable hosts, one 'host[:slots]' per line; hvdrun "
                      "runs it every second");
  elastic->add_option("--slots-per-host", o.elastic.slotsPerHost,
                      "Slots of a discovered host whose line gives none (default 1)")
      ->check(CLI::Range(1, 1 << 16));
  elastic->add_option("--elastic-timeout", elasticTimeout,
                      "Seconds to wait for --min-np usable slots, and workers' wait for a new "
                      "round (HVD_ELASTIC_TIMEOUT)")
      ->check(CLI::Range(1, 86400));
  elastic->add_option("--reset-limit", o.elastic.resetLimit,
                      "Fail the job instead of forming more than this many new rounds")
      ->check(CLI::Range(0, 1 << 30));
  elastic->add_option("--blacklist-cooldown-range", o.elastic.cooldownRange,
                      "MIN MAX: a failed host comes back after MIN seconds, twice as long after "
                      "each further failure, at most MAX (default: never)")
      ->expected(2)
      ->check(CLI::Range(1, 86400));
  RuntimeFlags& rf = out.runtime;
  auto* tuning = app.add_option_group("Runtime", "Engine knobs, exported to workers as HVD_*");
  tuning->add_option("--fusion-threshold-mb", rf.fusionThresholdMb,
                     "Fusion buffer size in MB; 0 turns fusion off (HVD_FUSION_THRESHOLD)");
  tuning->add_option("--cycle-time-ms", rf.cycleTimeMs,
                     "Hold ready work this long to fuse more; 0 runs it at once (HVD_CYCLE_TIME)");
  tuning->add_option("--cache-capacity", rf.cacheCapacity,
                     "Response cache entries; 0 turns it off (HVD_CACHE_CAPACITY)");
  tuning->add_option("--timeline-filename", rf.timelineFilename,
                     "Rank 0 writes a Chrome-trace timeline here (HVD_TIMELINE)");
  tuning->add_flag("--timeline-mark-cycles", rf.timelineMarkCycles,
                   "Mark each list of work rank 0 dispatches in the timeline "
                   "(HVD_TIMELINE_MARK_CYCLES=1)");
  tuning->add_option("--stall-check-warning-time-seconds", rf.stallWarningSeconds,
                     "Report operations some ranks have not submitted after this long "
                     "(HVD_STALL_CHECK_TIME_SECONDS)");
  tuning->add_option("--stall-check-shutdown-time-seconds", rf.stallShutdownSeconds,
                     "Fail the job when an operation stalls this long; 0 never "
                     "(HVD_STALL_SHUTDOWN_TIME_SECONDS)");
  tuning->add_flag("--no-stall-check", rf.noStallCheck,
                   "Turn the stall inspector off (HVD_STALL_CHECK_DISABLE=1)");
  tuning->add_option("--bind-to", rf.bindTo,
                     "core: bind each worker to its local rank's share of the host's CPUs when "
                     "there are at least as many CPUs as local ranks (default); none: do not "
                     "bind (HVD_BIND_TO)")
      ->check(CLI::IsMember({"core", "none"}));
  auto* transport = tuning->add_option(
      "--transport", rf.transport,
      "auto: shared memory between ranks when all are on one host, else TCP (default); tcp: "
      "always TCP; shm: shared memory or fail (HVD_TRANSPORT)")
      ->check(CLI::IsMember({"auto", "tcp", "shm"}));
  // The choices come from the parameter's declaration, so the flag cannot drift from it.
  tuning->add_option("--allreduce-algorithm", rf.allreduceAlgorithm,
                     "Host allreduce's algorithm: auto: across hosts the cost model's pick "
                     "(HVD_NETWORK_MODEL), within a host recursive doubling below "
                     "HVD_ALLREDUCE_RING_THRESHOLD and the ring from there (default); or force "
                     "ring, recursive_doubling or rabenseifner (HVD_ALLREDUCE_ALGORITHM)")
      ->check(CLI::IsMember(params::spec("HVD_ALLREDUCE_ALGORITHM").choices));
  tuning->add_option("--malloc-retain-mb", rf.mallocRetainMb,
                     "Workers' malloc serves blocks up to this size from its heap and keeps up "
                     "to this much freed memory for reuse, so CPU training stops re-faulting its "
                     "activations every step; 0: glibc's defaults (HVD_MALLOC_RETAIN_MB)");
  tuning->add_option("--gradient-overlap", rf.gradientOverlap,
                     "When DistributedOptimizer starts each gradient's allreduce: on: from its "
                     "backward hook; off: at step(); auto: off for host-memory gradients when "
                     "all ranks are on one host and compute fills their CPUs, else on "
                     "(default) (HVD_GRADIENT_OVERLAP)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  tuning->add_option("--check-replicas", rf.checkReplicas,
                     "Check that every rank holds the same trainable weights: first: once, at "
                     "the start of training (default); every:N: also every N updates; off: "
                     "never (HVD_CHECK_REPLICAS)");
  bool tcpOnly = false;
  tuning->add_flag("--tcp", tcpOnly, "Same as --transport tcp (horovodrun's flag)")
      ->excludes(transport);
  bool hierarchicalAllreduce = false, hierarchicalAllgather = false;
  auto* hierAllreduce = tuning->add_flag(
                   "--hierarchical-allreduce,!--no-hierarchical-allreduce", hierarchicalAllreduce,
                   "Allreduce within each host (shared memory, or NCCL for GPU tensors), across "
                   "hosts over TCP, then within each host again; needs as many ranks on every "
                   "host (HVD_HIERARCHICAL_ALLREDUCE=1; the no- form overrides a config file)");
  auto* hierAllgather = tuning->add_flag(
                   "--hierarchical-allgather,!--no-hierarchical-allgather", hierarchicalAllgather,
                   "Allgather host memory across hosts over TCP, then within each host over "
                   "shared memory; needs as many ranks on every host "
                   "(HVD_HIERARCHICAL_ALLGATHER=1; the no- form overrides a config file)");
  tuning->add_flag("--autotune", rf.autotune,
                   "Rank 0 tunes the fusion threshold and cycle time while the job trains, then "
                   "keeps the best; a knob given explicitly stays fixed (HVD_AUTOTUNE=1)");
  tuning->add_option("--autotune-log-file", rf.autotuneLogFile,
                     "CSV file rank 0 appends each autotune sample and the choice to "
                     "(HVD_AUTOTUNE_LOG)");
  tuning->add_option("--autotune-warmup-samples", rf.autotuneWarmupSamples,
                     "Samples discarded at the start (HVD_AUTOTUNE_WARMUP_SAMPLES, default 3)");
  tuning->add_option("--autotune-steps-per-sample", rf.autotuneStepsPerSample,
                     "Training steps per sample (HVD_AUTOTUNE_STEPS_PER_SAMPLE, default 10)");
  tuning->add_option("--autotune-bayes-opt-max-samples", rf.autotuneMaxSamples,
                     "Samples measured before the best setting is kept "
                     "(HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, default 20)");
  tuning->add_option("--autotune-gaussian-process-noise", rf.autotuneNoise,
                     "Noise assumed in one sample's score, relative to the scores' variance "
                     "(HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE, default 0.8)");
  tuning->add_option("--config-file", rf.configFile,
                     "JSON file with Horovod's config sections (params, autotune, timeline, "
                     "stall_check, logging); flags override it");
  // horovodrun's controller choice and its cache of host checks: hvdrun always runs its own
  // TCP controller (what --gloo picks) and caches nothing, so both are accepted and change nothing.
  auto* compat = app.add_option_group("horovodrun", "Accepted from horovodrun, no effect in hvd");
  compat->add_flag("--gloo")->description(
      "hvdrun always runs its own controller over TCP, as Gloo's");
  compat->add_flag("--disable-cache")->description("hvdrun caches no host checks");
  app.add_flag("--print-config", out.printConfig,
               "List every HVD_* parameter with its default, range and current value, then exit");
  app.add_flag("--check-build", out.checkBuild,
               "Show what this build supports (CUDA, NCCL), what this machine offers it (driver, "
               "devices, NCCL library) and what the workers' python3 finds (hvd, PyTorch, "
               "NumPy), then exit; status 1 when python3 cannot import hvd");
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
  o.command = app.remaining();
  // An option hvdrun lacks (horovodrun's --mpi, a typo) would otherwise be taken
  // for the command and fail as "command not found".
  if (!o.command.empty() && o.command.front().size() > 1 && o.command.front()[0] == '-' &&
      o.command.front() != "--") {
    std::fprintf(stderr,
                 "hvdrun: error: unknown option '%s' (hvdrun --help lists them; a command "
                 "that starts with '-' goes after --)\n",
                 o.command.front().c_str());
    return 2;
  }
  // `hvdrun -np 2 -- python train.py`: the separator ends hvdrun's options, as in mpirun; a later
  // one belongs to the command.
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());
  if (tcpOnly) rf.transport = "tcp";
  if (hierAllreduce->count()) rf.hierarchicalAllreduce = hierarchicalAllreduce;
  if (hierAllgather->count()) rf.hierarchicalAllgather = hierarchicalAllgather;
  o.startTimeout = std::chrono::seconds(startTimeout);
  o.elastic.timeout = std::chrono::seconds(elasticTimeout);
  o.elastic.timeoutGiven = app.count("--elastic-timeout") > 0;
  o.grace = std::chrono::seconds(grace);
  o.ssh.connectTimeout = std::chrono::seconds(connectTimeout);
  if (!strictHostKeys.empty()) o.ssh.hostKeyPolicy = ssh::parseHostKeyPolicy(strictHostKeys);
  if (noHostKeyCheck) {
    if (o.ssh.hostKeyPolicy && *o.ssh.hostKeyPolicy != ssh::HostKeyPolicy::Off) {
      std::fprintf(stderr,
                   "hvdrun: error: --ssh-no-host-key-check means --ssh-strict-host-key-checking "
                   "no, but --ssh-strict-host-key-checking %s was given too\n",
                   strictHostKeys.c_str());
      return 2;
    }
    o.ssh.hostKeyPolicy = ssh::HostKeyPolicy::Off;
  }
  out.logLevelGiven = app.count("--log-level") > 0;
  return -1;
}

}  // namespace hvd::launcher
