#include "common/params.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/error.h"
#include "common/handshake_listener.h"

extern char** environ;

namespace hvd::params {

const std::vector<ParamSpec>& allParams() {
  static const std::vector<ParamSpec> kParams = {
      {"HVD_RANK", "HOROVOD_RANK", ParamType::Int, "0", 0, INT32_MAX, false,
       "Global rank of this worker (set by hvdrun)."},
      {"HVD_SIZE", "HOROVOD_SIZE", ParamType::Int, "1", 1, INT32_MAX, false,
       "Number of workers in the job (set by hvdrun)."},
      {"HVD_LOCAL_RANK", "HOROVOD_LOCAL_RANK", ParamType::Int, "0", 0, INT32_MAX, false,
       "Rank of this worker among the workers on its host (set by hvdrun)."},
      {"HVD_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE", ParamType::Int, "1", 1, INT32_MAX, false,
       "Number of workers on this worker's host (set by hvdrun)."},
      {"HVD_CROSS_RANK", "HOROVOD_CROSS_RANK", ParamType::Int, "0", 0, INT32_MAX, false,
       "Index of this worker's host among the hosts that have its local rank (set by hvdrun)."},
      {"HVD_CROSS_SIZE", "HOROVOD_CROSS_SIZE", ParamType::Int, "1", 1, INT32_MAX, false,
       "Number of hosts that have a worker with this local rank (set by hvdrun)."},
      {"HVD_HOSTNAME", "HOROVOD_HOSTNAME", ParamType::String, "", 0, 0, false,
       "Host name of this worker as the launcher knows it (set by hvdrun)."},
      {"HVD_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_ADDR", ParamType::String, "", 0, 0, false,
       "Address of the launcher's rendezvous server; unset means a single-rank job."},
      {"HVD_RENDEZVOUS_PORT", "HOROVOD_GLOO_RENDEZVOUS_PORT", ParamType::Int, "0", 0, 65535,
       false, "Port of the launcher's rendezvous server."},
      {"HVD_NETWORK_INTERFACE", "HOROVOD_GLOO_IFACE", ParamType::String, "", 0, 0, false,
       "Interface whose address this worker listens on for its peers (set by hvdrun from "
       "--network-interface); unset: the address it reaches the rendezvous from."},
      {"HVD_SECRET", "", ParamType::String, "", 0, 0, true,
       "Job secret for the HMAC handshake on every connection (set by hvdrun; never printed)."},
      {"HVD_JOB_ID", "", ParamType::String, "local", 0, 0, false,
       "Identifier that scopes this job's rendezvous keys (set by hvdrun)."},
      {"HVD_ELASTIC", "HOROVOD_ELASTIC", ParamType::Int, "0", 0, 1, false,
       "1: this worker belongs to an elastic job and takes its rank from the launcher's current "
       "round at every init (set by hvdrun with --min-np, --max-np or --host-discovery-script)."},
      {"HVD_WORKER_ID", "", ParamType::Int, "-1", -1, INT32_MAX, false,
       "This worker's number in an elastic job, fixed for its life while its rank may change "
       "(set by hvdrun)."},
      {"HVD_ELASTIC_TIMEOUT", "HOROVOD_ELASTIC_TIMEOUT", ParamType::Int, "600", 1, 86400, false,
       "Seconds an elastic worker waits at init for the launcher to form a round that includes "
       "it, and hvdrun waits for --min-np slots after losing workers."},
      {"HVD_START_TIMEOUT", "HOROVOD_START_TIMEOUT", ParamType::Int, "30", 1, 86400, false,
       "Seconds a worker waits for all peers to join the rendezvous and connect."},
      {"HVD_HANDSHAKE_TIMEOUT_SECONDS", "", ParamType::Int,
       std::to_string(io::kDefaultHandshakeTimeout.count()), 1, 600, false,
       "Seconds a connection to a worker's or the rendezvous's listening port may take to "
       "prove it knows the job secret before it is dropped. Handshakes run side by side, so a "
       "stranger that connects and stays silent delays nobody; this only bounds what it holds."},
      {"HVD_SSH_CONCURRENCY", "", ParamType::Int, "32", 1, 4096, false,
       "Remote hosts hvdrun connects to and checks over SSH at once (read by hvdrun; same as "
       "--ssh-concurrency). More hosts wait for a free slot; each keeps the connection it was "
       "checked on for its ranks."},
      {"HVD_OP_TIMEOUT", "", ParamType::Int, "300", 1, 86400, false,
       "Seconds a collective may wait on a peer before failing with a timeout naming it."},
      {"HVD_ALLREDUCE_RING_THRESHOLD", "", ParamType::Int, "131072", 0, INT64_MAX, false,
       "Allreduce payloads of at least this many bytes use the ring; smaller ones use recursive "
       "doubling (with HVD_ALLREDUCE_ALGORITHM=auto)."},
      {"HVD_ALLREDUCE_ALGORITHM", "", ParamType::String, "auto", 0, 0, false,
       "Algorithm of host-memory allreduce. auto: across hosts the one HVD_NETWORK_MODEL's cost "
       "model predicts fastest, within a host by payload size (HVD_ALLREDUCE_RING_THRESHOLD); "
       "ring: pipelined ring, 2(n-1) rounds, bandwidth-optimal; recursive_doubling: log2 n "
       "rounds of whole-buffer exchanges, latency-optimal; rabenseifner: reduce-scatter by "
       "recursive halving and allgather by recursive doubling, 2 log2 n rounds moving as many "
       "bytes as the ring. With HVD_HIERARCHICAL_ALLREDUCE=1 it picks the stage across hosts. "
       "Must be the same on every rank (same as hvdrun --allreduce-algorithm).",
       {"auto", "ring", "recursive_doubling", "rabenseifner"}},
      {"HVD_NETWORK_MODEL", "", ParamType::String, "", 0, 0, false,
       "A JSON file describing the cluster's links (latency and bandwidth within a host and "
       "between hosts, reduction speed), as hvd-bench --calibrate writes it. With "
       "HVD_ALLREDUCE_ALGORITHM=auto, an allreduce across hosts takes the algorithm this model "
       "predicts fastest; empty: the built-in model (100 Gb/s NICs). Ranks per host come from "
       "the job."},
      {"HVD_SEGMENT_BYTES", "", ParamType::Int, "0", 0, 1 << 30, false,
       "Largest message of allreduce's pipelined ring and broadcast's chain. 0: the "
       "transport's, 512 KiB over TCP (fewer system calls) and 128 KiB over shared memory "
       "(segments stay in the core's cache); otherwise at least 1024."},
      {"HVD_SOCKET_BUFFER_BYTES", "", ParamType::Int, "4194304", 0, 1 << 30, false,
       "SO_SNDBUF/SO_RCVBUF of worker links (capped by net.core.[rw]mem_max); 0 keeps the "
       "kernel's autotuning."},
      {"HVD_TRANSPORT", "", ParamType::String, "auto", 0, 0, false,
       "How ranks' host-memory links travel. auto: shared memory when every rank of the job "
       "is on one host (falling back to TCP, with a warning naming the rank and reason, when "
       "any rank cannot use it), else TCP; tcp: always TCP; shm: shared memory, and init "
       "fails with the reason when it cannot be used (same as hvdrun --transport).",
       {"auto", "tcp", "shm"}},
      {"HVD_SHM_BUFFER_BYTES", "", ParamType::Int, "1048576", 4096, 1 << 30, false,
       "Bytes of each shared-memory ring (one per ordered pair of local ranks, a multiple of "
       "64): a rank's segment in /dev/shm holds one per local peer, for each of its two "
       "communicators."},
      {"HVD_SPIN_MICROSECONDS", "", ParamType::Int, "30", 0, 100000, false,
       "Microseconds the engine keeps polling its links after its last activity, a "
       "collective the engine runs polls for a message of at most 64 KiB before it sleeps on "
       "a peer, and a wait on an operation's handle polls before it sleeps: a message or "
       "result arriving within it costs no kernel wake-up (5-170 us each on a VM). Costs up "
       "to that much CPU per wait; 0 always sleeps at once. The engine polls through a larger "
       "transfer only while a caller is blocked on a handle: otherwise that would take CPU "
       "from the training step on its core."},
      {"HVD_DIRECT_SPIN_MICROSECONDS", "", ParamType::Int, "2000", 0, 1000000, false,
       "Microseconds a collective called directly, not through the engine (hvd-bench's "
       "sweeps), polls for each message of any size before it sleeps, as MPI's blocking "
       "calls do: its caller has nothing else to do meanwhile. 0 always sleeps at once."},
      {"HVD_BIND_TO", "", ParamType::String, "core", 0, 0, false,
       "core: a worker started by hvdrun binds itself (all its threads) to its local rank's "
       "share of the CPUs it may use, as mpirun --bind-to core does, when its host has at "
       "least as many of them as local ranks; none: no binding (same as hvdrun --bind-to). "
       "Ranks started by srun or mpirun keep the binding their launcher chose.",
       {"core", "none"}},
      {"HVD_GRADIENT_OVERLAP", "", ParamType::String, "auto", 0, 0, false,
       "When hvd.torch's DistributedOptimizer starts each gradient's allreduce. on: from the "
       "gradient's backward hook, as soon as it is ready, so communication overlaps the rest of "
       "backward (Horovod's way); off: all of them when step() (or synchronize()) is called; "
       "auto: off for a gradient in host memory when every rank is on one host and torch's "
       "intra-op threads fill the rank's share of the CPUs, on otherwise. Then, moving "
       "host-memory gradients is CPU work on the cores backward is using, so overlapping it only "
       "makes the two take turns (the MNIST CNN trained 1-4% faster with off there, a model of 300 "
       "small gradients 11%); "
       "across hosts, on GPUs or with a spare core the transfer runs while backward computes, "
       "and overlapping hides it.",
       {"auto", "on", "off"}},
      {"HVD_CHECK_REPLICAS", "", ParamType::String, "first", 0, 0, false,
       "Whether the frontends' optimizers check that every rank holds the same trainable "
       "weights (one small allreduce of per-variable sums). first: once, at the start of "
       "training, after the recipe's broadcast (torch: after the first update; Keras and TF1: "
       "before it, or after it when the Keras callback broadcasts at the end of the first "
       "batch; DistributedGradientTape: after it); every:N: then, and every N updates; off: "
       "never. A mismatch fails the job on every rank, naming the ranks and the first "
       "differing variable. Same as hvdrun --check-replicas."},
      {"HVD_MALLOC_RETAIN_MB", "", ParamType::Int, "0", 0, 2047, false,
       "At init, a worker's malloc (glibc's) is set to serve blocks of up to this many MB from "
       "its heap and to keep up to this many MB of freed memory for reuse, instead of mapping "
       "large blocks afresh and returning them to the kernel when freed. CPU training that "
       "allocates the same activations every step then stops spending kernel time zero-filling "
       "their pages (the MNIST example trained 13-16% faster on this project's machine). The "
       "cost: up to that much freed memory stays in each worker. 0 keeps glibc's defaults"
       " (or MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_, when set)."},
      {"HVD_GPU_BACKEND", "", ParamType::String, "nccl", 0, 0, false,
       "How collectives on GPU tensors travel. nccl: GPU to GPU through NCCL when every rank "
       "of the communicator has a GPU of its own, else through host memory with one warning "
       "saying why; staged: always through host memory and the TCP algorithms.",
       {"nccl", "staged"}},
      {"HVD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE", ParamType::Int, "0", 0, 1,
       false,
       "1: allreduce in three stages on a job over several hosts with as many ranks each: "
       "within each host (shared memory for host memory, NCCL for GPU tensors), across hosts "
       "over TCP, within each host again. Must be the same on every rank; other operations "
       "stay flat (allgather has HVD_HIERARCHICAL_ALLGATHER). Same as hvdrun "
       "--hierarchical-allreduce."},
      {"HVD_HIERARCHICAL_ALLGATHER", "HOROVOD_HIERARCHICAL_ALLGATHER", ParamType::Int, "0", 0, 1,
       false,
       "1: allgather host memory in two stages on a job over several hosts with as many ranks "
       "each: across hosts over TCP among the ranks of the same local index, then within each "
       "host (shared memory). Must be the same on every rank; GPU tensors through NCCL stay "
       "flat. Same as hvdrun --hierarchical-allgather."},
      {"HVD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", ParamType::Int, "134217728", 0,
       int64_t{1} << 40, false,
       "Bytes of ready allreduce tensors packed into one fusion buffer and reduced as one; 0 "
       "turns fusion off."},
      {"HVD_INLINE_ALLREDUCE_BYTES", "", ParamType::Int, "256", 0, 65536, false,
       "Host-memory allreduces of at most this many bytes (a loss, a metric) travel with their "
       "negotiation request; rank 0 reduces them and sends the result with its reply, so no "
       "collective runs: two trips between ranks instead of three. 0 turns this off."},
      {"HVD_CYCLE_TIME", "HOROVOD_CYCLE_TIME", ParamType::Double, "0", 0, 10000, false,
       "Milliseconds the coordinator holds ready work to fuse more of it; 0 runs work as soon "
       "as every rank has submitted it."},
      {"HVD_AUTOTUNE", "HOROVOD_AUTOTUNE", ParamType::Int, "0", 0, 1, false,
       "1: rank 0 tunes the fusion threshold and the cycle time while the job trains, by "
       "Bayesian optimization of the bytes reduced per second over samples of training steps, "
       "then keeps the best; a knob set explicitly (HVD_FUSION_THRESHOLD, HVD_CYCLE_TIME) stays "
       "as set. Same as hvdrun --autotune."},
      {"HVD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", ParamType::String, "", 0, 0, false,
       "CSV file rank 0 appends the autotuner's samples to (setting, steps, seconds, bytes, "
       "score) and, last, the chosen setting; needs HVD_AUTOTUNE=1."},
      {"HVD_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", ParamType::Int, "3", 0,
       100000, false,
       "Samples at the start that the autotuner measures with the configured setting and "
       "discards."},
      {"HVD_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", ParamType::Int, "10",
       1, 1000000, false,
       "Training steps per autotune sample; a step ends when an operation name comes round "
       "again."},
      {"HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
       ParamType::Int, "20", 1, 200, false,
       "Samples the autotuner measures (after the warm-up) before it keeps the best setting."},
      {"HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
       ParamType::Double, "0.8", 0, 1, false,
       "Noise the autotuner's Gaussian process assumes in one sample's score, as a share of the "
       "scores' variance: higher trusts single samples less."},
      {"HVD_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", ParamType::Int, "1024", 0, 1 << 20, false,
       "Operations the response cache remembers, so repeated steps send a cache id instead of "
       "the tensor description; 0 turns the cache off."},
      {"HVD_TIMELINE", "HOROVOD_TIMELINE", ParamType::String, "", 0, 0, false,
       "File rank 0 writes a Chrome-trace/Perfetto timeline of every tensor's phases to; empty: "
       "no timeline."},
      {"HVD_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", ParamType::Int, "0", 0, 1,
       false,
       "1: the timeline also marks (CYCLE_START) each list of work rank 0 dispatches; hvd has "
       "no fixed cycle, so these show when negotiation released work."},
      {"HVD_HOROVOD_COMPAT", "", ParamType::Int, "0", 0, 1, false,
       "1 makes hvdrun put hvd's horovod compatibility package on the workers' PYTHONPATH, so "
       "'import horovod.torch as hvd' runs on hvd (same as --horovod-compat)."},
      {"HVD_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE", ParamType::Int, "0", 0, 1, false,
       "1 turns the stall inspector off (no warnings, no stall shutdown)."},
      {"HVD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS", ParamType::Int, "60", 1,
       86400, false,
       "Seconds an operation may wait for some ranks before rank 0 logs its name and the "
       "missing ranks."},
      {"HVD_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", ParamType::Int,
       "300", 0, 86400, false,
       "Seconds an operation may wait for some ranks before the job fails with the stall "
       "report; 0 waits forever."},
      {"HVD_LIVENESS_TIMEOUT_SECONDS", "", ParamType::Int, "60", 0, 86400, false,
       "Seconds a rank's engine may go without a sign of life from a peer it depends on "
       "(every engine sends one each second, also inside collectives; rank 0 watches every "
       "rank, the others rank 0) before the job fails naming that rank: a process that is "
       "stopped (SIGSTOP, a debugger, a paused job), hung in the kernel or cut off. A rank "
       "busy in its training code still sends them. 0: never."},
      {"HVD_PROCESS_SETS", "", ParamType::String, "", 0, 0, false,
       "Process sets created at init, as rank lists separated by ';' (e.g. \"0,1;2,3\"); they "
       "get ids 1, 2, ... in this order."},
      {"HVD_LOG_LEVEL", "HOROVOD_LOG_LEVEL", ParamType::String, "warn", 0, 0, false,
       "Log level: trace, debug, info, warn, error, critical or off (Horovod's warning and fatal, "
       "in any case, too)."},
      {"HVD_LOG_HIDE_TIME", "HOROVOD_LOG_HIDE_TIME", ParamType::Int, "0", 0, 1, false,
       "1 leaves the local date and time out of hvd's log lines (same as --log-hide-timestamp)."},
      {"HVD_LOG_SUBSYS", "", ParamType::String, "", 0, 0, false,
       "Comma-separated log subsystems to show (e.g. tcp,rdzv); empty shows all."},
  };
  return kParams;
}

namespace {
std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}
}  // namespace

const ParamSpec& spec(const std::string& name) {
  for (const auto& p : allParams())
    if (p.name == name) return p;
  throw InternalError("unknown configuration parameter " + name);
}

int64_t parseInt(const std::string& text, int64_t min, int64_t max, const std::string& what) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InvalidArgument(what + "='" + text + "': not an integer");
  if (value < min || value > max)
    throw InvalidArgument(detail::concat(what, "=", value, ": out of range [", min, ", ", max,
                                         "]"));
  return value;
}

double parseDouble(const std::string& text, double min, double max, const std::string& what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InvalidArgument(what + "='" + text + "': not a number");
  if (!(value >= min && value <= max))
    throw InvalidArgument(detail::concat(what, "=", value, ": out of range [", min, ", ", max,
                                         "]"));
  return value;
}

void checkCombinations(const ParamValues& v) {
  bool autotune = v.getInt("HVD_AUTOTUNE") == 1;
  if (!autotune && !v.getString("HVD_AUTOTUNE_LOG").empty())
    throw InvalidArgument("--autotune-log-file (HVD_AUTOTUNE_LOG=" +
                          v.getString("HVD_AUTOTUNE_LOG") + ") needs --autotune (HVD_AUTOTUNE=1)");
  if (autotune && v.isSet("HVD_FUSION_THRESHOLD") && v.isSet("HVD_CYCLE_TIME"))
    throw InvalidArgument("--autotune tunes the fusion threshold and the cycle time, but both "
                          "are given (--fusion-threshold-mb/HVD_FUSION_THRESHOLD and "
                          "--cycle-time-ms/HVD_CYCLE_TIME), which fixes them: leave one out");
  if (v.getInt("HVD_TIMELINE_MARK_CYCLES") == 1 && v.getString("HVD_TIMELINE").empty())
    throw InvalidArgument("--timeline-mark-cycles (HVD_TIMELINE_MARK_CYCLES=1) needs a timeline "
                          "(--timeline-filename, HVD_TIMELINE)");
}

std::map<std::string, std::string> environmentSnapshot() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

ParamValues ParamValues::fromEnvironment() { return fromMap(environmentSnapshot()); }

ParamValues ParamValues::fromMap(const std::map<std::string, std::string>& env) {
  ParamValues out;
  for (const auto& p : allParams()) {
    Value v;
    v.text = p.defaultValue;
    std::string from = p.name;
    auto it = env.find(p.name);
    if (it == env.end() && !p.horovodAlias.empty()) {
      it = env.find(p.horovodAlias);
      from = p.horovodAlias;
    }
    if (it != env.end()) {
      v.text = it->second;
      v.source = Source::Environment;
    }
    if (!p.choices.empty() &&
        std::find(p.choices.begin(), p.choices.end(), v.text) == p.choices.end())
      throw InvalidArgument(from + "='" + v.text + "': expected one of " + joined(p.choices));
    if (p.type == ParamType::Int) v.number = parseInt(v.text, p.min, p.max, from);
    if (p.type == ParamType::Double)
      v.real = parseDouble(v.text, static_cast<double>(p.min), static_cast<double>(p.max), from);
    out.values_[p.name] = v;
  }
  return out;
}

int64_t ParamValues::getInt(const std::string& name) const {
  HVD_ENFORCE(spec(name).type == ParamType::Int, name, " is not an integer parameter");
  return values_.at(name).number;
}

double ParamValues::getDouble(const std::string& name) const {
  HVD_ENFORCE(spec(name).type == ParamType::Double, name, " is not a real-valued parameter");
  return values_.at(name).real;
}

std::string ParamValues::getString(const std::string& name) const {
  spec(name);
  return values_.at(name).text;
}

bool ParamValues::isSet(const std::string& name) const {
  return source(name) == Source::Environment;
}

Source ParamValues::source(const std::string& name) const {
  spec(name);
  return values_.at(name).source;
}

std::string describeAll(const ParamValues& current) {
  std::string out;
  for (const auto& p : allParams()) {
    bool isInt = p.type == ParamType::Int;
    bool isNumber = isInt || p.type == ParamType::Double;
    std::string value = current.isSet(p.name)
                            ? (p.secret ? "(set)" : current.getString(p.name))
                            : "(default)";
    out += p.name + (p.horovodAlias.empty() ? "" : " (also " + p.horovodAlias + ")") + "\n";
    out += detail::concat("    ", isInt ? "integer" : isNumber ? "number" : "string", ", default ",
                          p.defaultValue.empty() ? "unset" : p.defaultValue);
    if (isNumber) out += detail::concat(", range [", p.min, ", ", p.max, "]");
    if (!p.choices.empty()) out += ", one of " + joined(p.choices);
    out += ", now " + value + "\n    " + p.description + "\n";
  }
  return out;
}

}  // namespace hvd::params
