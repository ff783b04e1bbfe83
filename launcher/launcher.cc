// hvdrun's one launch pipeline, for static and elastic jobs alike; what differs between them
// is the LaunchStrategy (launch_strategy.h).

#include "launcher/launcher.h"

#include <unistd.h>

#include <climits>

#include "collectives/rendezvous/failure_reports.h"
#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "collectives/transport/shm/shm_cleanup.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/open_files.h"
#include "common/params.h"
#include "launcher/host_spec.h"
#include "launcher/job.h"
#include "launcher/launch_strategy.h"
#include "launcher/orphan_guardian.h"
#include "launcher/python_path.h"
#include "launcher/remote_hosts.h"
#include "launcher/remote_ranks.h"

namespace hvd::launcher {
namespace {

// The failure summary reads the ranks' reports from hvdrun's own server: a local round trip.
constexpr std::chrono::milliseconds kReadReportsTimeout{2000};

void validate(const LaunchOptions& o) {
  if (o.command.empty())
    throw InvalidArgument("no command to run (usage: hvdrun -np N [-H hosts] command [args])");
  if (looksLikeHostSlots(o.command[0]))
    throw InvalidArgument("the command '" + o.command[0] +
                          "' looks like a host spec: join hosts with commas, as in "
                          "-H a:1,b:1");
}

std::string workingDirectory() {
  char buf[PATH_MAX] = {};
  if (!::getcwd(buf, sizeof buf)) throw IoError("cannot read the working directory");
  return buf;
}

// A random job id and 256-bit secret.
JobIdentity newJobIdentity() {
  JobIdentity job;
  job.secret = auth::randomHex(32);
  job.jobId = auth::randomHex(8);
  return job;
}

// Environment every worker gets beyond its placement: the runtime knobs and timeouts.
Environment commonWorkerParams(const LaunchOptions& o) {
  Environment extra(o.runtimeParams.begin(), o.runtimeParams.end());
  extra[params::envName(params::ParamId::StartTimeout)] = std::to_string(o.startTimeout.count());
  extra.insert({params::envName(params::ParamId::LogLevel), o.logLevel});  // unless set already
  return extra;
}

// How long the rendezvous gives a connection to prove the job secret: the workers' value.
std::chrono::milliseconds handshakeTimeout(const LaunchOptions& o, const Environment& base) {
  Environment env = base;
  for (const auto& [name, value] : o.runtimeParams) env[name] = value;
  return std::chrono::seconds(
      params::ParamValues::fromMap(env).getInt(params::ParamId::HandshakeTimeout));
}

// A local worker stopped during init may not have unlinked its shared-memory segment (a remote
// host's run script removes its ranks' own).
void removeLeftSegments(const JobIdentity& job) {
  if (int left = collectives::shm::removeSegments(collectives::shm::jobSegmentPrefix(job.jobId)))
    log::logger("launcher")
        ->info(
            "removed {} shared-memory segments the job's ranks left in "
            "/dev/shm",
            left);
}

// Before anything opens them: hvdrun's streams and rendezvous connections for every rank.
void ensureLauncherFiles(std::size_t ranks) {
  if (ranks == 0) return;
  auto limit = ensureOpenFiles(ranks * kLauncherFilesPerRank + kOpenFilesKept, "",
                               detail::concat("starting ", ranks,
                                              " ranks (each one's output streams and "
                                              "rendezvous connection in hvdrun)"));
  if (limit.raised())
    log::logger("launcher")
        ->info("raised the open-file limit (ulimit -n) from {} to {} for {} ranks", limit.before,
               limit.after, ranks);
}

}  // namespace

int launch(const LaunchOptions& options) {
  Environment base = params::environmentSnapshot();
  addPythonPath(base, findPythonPackage("/proc/self/exe"), options.horovodCompat);
  validate(options);
  // Read before anything starts: a malformed HVD_SSH_CONCURRENCY is refused at once.
  LaunchContext context{options, base, workingDirectory(), sshConcurrency(options.ssh, base)};
  auto strategy = options.elastic.requested() ? elasticStrategy(context) : staticStrategy(context);
  ensureLauncherFiles(strategy->mostRanks());
  JobIdentity job = newJobIdentity();
  Environment extra = commonWorkerParams(options);
  strategy->addWorkerParams(extra);
  workerEnvironment(base, RankPlacement{}, job, options.exports, extra);  // checks -x

  // The guardian forks without exec, so it must exist before any thread (the preflight's, the
  // discovery's, the rendezvous server's, the remote hosts') does, and before any SSH
  // connection it would inherit.
  auto guardian = OrphanGuardian::start(options.grace);
  guardian->removeSegmentsOnDeath(collectives::shm::jobSegmentPrefix(job.jobId));
  strategy->prepare();
  rendezvous::RendezvousServer server(rendezvousBindAddress(strategy->reach()), job.secret, 0,
                                      handshakeTimeout(options, base));
  job.rendezvousAddr = server.address();
  job.rendezvousPort = server.port();
  log::logger("launcher")
      ->info("{}; rendezvous at {}:{}", strategy->describe(job), job.rendezvousAddr,
             job.rendezvousPort);

  // Destroyed in reverse: the Job, its policy (an elastic job's store client), the remote
  // hosts' threads (which may still ask the server to listenAlso), then the server.
  RemoteRanks remote(context.sshSlots);
  JobStart start = strategy->start(server, job, extra, remote);
  Job running(options, std::move(start.local), remote, *guardian);
  running.setPolicy(start.policy.get());
  running.setFailureReports([&job] {
    rendezvous::TcpStoreClient reader(job.rendezvousAddr, job.rendezvousPort, job.secret,
                                      kReadReportsTimeout);
    return rendezvous::readFailureReports(reader, job.jobId);
  });
  int code = running.run();
  removeLeftSegments(job);
  return code;
}

}  // namespace hvd::launcher
