// Rows of the parameter table (common/param_table.h): who a worker is, where it finds its peers,
// how long it waits, and hvdrun's own settings.
// Included by common/param_rows.h only, once per expansion of the rows: no include guard.
// One row per parameter, laid out as a table rather than as code:
// clang-format off

HVD_PARAM(Rank, topology.rank, asIs,
    .name = "HVD_RANK", .horovodAlias = "HOROVOD_RANK",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = INT32_MAX,
    .description = "Global rank of this worker (set by hvdrun).")

HVD_PARAM(Size, topology.size, asIs,
    .name = "HVD_SIZE", .horovodAlias = "HOROVOD_SIZE",
    .type = ParamType::Int, .defaultValue = "1", .min = 1, .max = INT32_MAX,
    .description = "Number of workers (set by hvdrun).")

HVD_PARAM(LocalRank, topology.localRank, asIs,
    .name = "HVD_LOCAL_RANK", .horovodAlias = "HOROVOD_LOCAL_RANK",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = INT32_MAX,
    .description = "Rank among the workers on this host.")

HVD_PARAM(LocalSize, topology.localSize, asIs,
    .name = "HVD_LOCAL_SIZE", .horovodAlias = "HOROVOD_LOCAL_SIZE",
    .type = ParamType::Int, .defaultValue = "1", .min = 1, .max = INT32_MAX,
    .description = "Workers on this host.")

HVD_PARAM(CrossRank, topology.crossRank, asIs,
    .name = "HVD_CROSS_RANK", .horovodAlias = "HOROVOD_CROSS_RANK",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = INT32_MAX,
    .description = "Index of this host among the hosts that have this local rank.")

HVD_PARAM(CrossSize, topology.crossSize, asIs,
    .name = "HVD_CROSS_SIZE", .horovodAlias = "HOROVOD_CROSS_SIZE",
    .type = ParamType::Int, .defaultValue = "1", .min = 1, .max = INT32_MAX,
    .description = "Hosts that have this local rank.")

HVD_PARAM(Hostname, topology.hostname, asIs,
    .name = "HVD_HOSTNAME", .horovodAlias = "HOROVOD_HOSTNAME",
    .type = ParamType::String, .defaultValue = "",
    .unsetMeans = "this host",
    .description = "Host name as the launcher knows it.")

HVD_PARAM(RendezvousAddr, rendezvousAddr, asIs,
    .name = "HVD_RENDEZVOUS_ADDR", .horovodAlias = "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    .type = ParamType::String, .defaultValue = "",
    .description = "Rendezvous server; unset means a single-rank job.")

HVD_PARAM(RendezvousPort, rendezvousPort, asIs,
    .name = "HVD_RENDEZVOUS_PORT", .horovodAlias = "HOROVOD_GLOO_RENDEZVOUS_PORT",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 65535,
    .description = "Rendezvous server port.")

HVD_PARAM(NetworkInterface, networkInterface, asIs,
    .name = "HVD_NETWORK_INTERFACE", .horovodAlias = "HOROVOD_GLOO_IFACE",
    .type = ParamType::String, .defaultValue = "",
    .description = "Interface whose address this worker listens on for its peers (hvdrun sets it "
                   "from `--network-interface`); unset: the address that reaches the rendezvous. A"
                   " missing interface is an error naming the host and its interfaces.")

HVD_PARAM(Secret, secret, asIs,
    .name = "HVD_SECRET",
    .type = ParamType::String, .defaultValue = "",
    .secret = true,
    .description = "Job secret for every connection's HMAC handshake. Never printed.")

HVD_PARAM(JobId, jobId, asIs,
    .name = "HVD_JOB_ID",
    .type = ParamType::String, .defaultValue = "local",
    .description = "Scopes this job's rendezvous keys.")

HVD_PARAM(ExternalLauncher, externalLauncher, asIs,
    .name = "HVD_EXTERNAL_LAUNCHER",
    .type = ParamType::String, .defaultValue = "",
    .description = "What started the ranks without hvdrun, when it is not srun or mpirun (whose "
                   "variables hvd reads itself): `hvd.spark.run` and `hvd.ray.RayExecutor` set "
                   "it to Spark or Ray, with every rank's placement and the rendezvous address "
                   "in the other `HVD_*` variables. Rank 0 then serves the job's rendezvous "
                   "itself, and messages name the launcher.")

HVD_PARAM(StartTimeout, startTimeout, seconds,
    .name = "HVD_START_TIMEOUT", .horovodAlias = "HOROVOD_START_TIMEOUT",
    .type = ParamType::Int, .defaultValue = "30", .min = 1, .max = 86400,
    .flag = {.names = "--start-timeout", .kind = ValueKind::Integer, .target = FlagTarget::Launcher,
             .group = FlagGroup::Main,
             .help = "Seconds workers wait for all peers to join"},
    .description = "Seconds to wait for every peer to join and connect.")

HVD_PARAM(HandshakeTimeout, handshakeTimeout, seconds,
    .name = "HVD_HANDSHAKE_TIMEOUT_SECONDS",
    .type = ParamType::Int, .defaultValue = std::to_string(io::kDefaultHandshakeTimeout.count()),
    .min = 1, .max = 600,
    .description = "Seconds a connection to the rendezvous or to a worker's port may take to prove"
                   " it knows the job secret before it is dropped (logged with its address). "
                   "Handshakes run side by side, so a silent stranger delays nobody; this bounds "
                   "only what it holds. hvdrun's rendezvous takes the value from hvdrun's "
                   "environment or config. See [security.md](security.md).")

HVD_PARAM(Elastic, elastic, asIs,
    .name = "HVD_ELASTIC", .horovodAlias = "HOROVOD_ELASTIC",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .description = "1: this worker belongs to an elastic job and takes its placement from hvdrun's"
                   " newest round at every `init` (set by hvdrun; [elastic.md](elastic.md)).")

HVD_PARAM(WorkerId, workerId, asIs,
    .name = "HVD_WORKER_ID",
    .type = ParamType::Int, .defaultValue = "-1", .min = -1, .max = INT32_MAX,
    .description = "The worker's number in an elastic job, fixed for its life (set by hvdrun).")

HVD_PARAM(ElasticTimeout, elasticTimeout, seconds,
    .name = "HVD_ELASTIC_TIMEOUT", .horovodAlias = "HOROVOD_ELASTIC_TIMEOUT",
    .type = ParamType::Int, .defaultValue = "600", .min = 1, .max = 86400,
    .flag = {.names = "--elastic-timeout", .kind = ValueKind::Integer,
             .target = FlagTarget::Launcher,
             .group = FlagGroup::Elastic,
             .help = "Seconds to wait for --min-np usable slots, and workers' wait for a new "
                     "round"},
    .description = "Seconds an elastic worker's `init` waits for a round that includes it; "
                   "hvdrun's `--elastic-timeout`.")

HVD_PARAM(ElasticCommitDir, elasticCommitDir, asIs,
    .name = "HVD_ELASTIC_COMMIT_DIR",
    .type = ParamType::String, .defaultValue = "",
    .flag = {.names = "--elastic-commit-dir", .kind = ValueKind::Text,
             .group = FlagGroup::Elastic,
             .help = "Rank 0 also writes each elastic commit here; a job that lost every worker, "
                     "or a new run, resumes from it"},
    .description = "An elastic job's on-disk commit (`--elastic-commit-dir`): at each "
                   "`state.commit()` rank 0 also writes the committed state to "
                   "`hvd-elastic-commit.pkl` in this directory (atomically: a new file replaces "
                   "the old), and `hvd.elastic.run` starts from that file when it exists, so the "
                   "training survives losing every worker, and a new run of the job resumes. The "
                   "directory must be on rank 0's host (shared storage when hosts change); "
                   "empty: commits stay in memory.")

HVD_LAUNCHER_PARAM(ElasticRequireProgress,
    .name = "HVD_ELASTIC_REQUIRE_PROGRESS",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--elastic-require-progress", .kind = ValueKind::Switch,
             .target = FlagTarget::Launcher,
             .group = FlagGroup::Elastic,
             .help = "Fail an elastic job that loses every worker holding its state, unless "
                     "--elastic-commit-dir keeps it"},
    .description = "1: an elastic job fails (exit code 1) when no worker that holds the "
                   "training's state is left and there is no `--elastic-commit-dir` to resume "
                   "from, instead of starting the training over (`--elastic-require-progress`; "
                   "read by hvdrun).")

HVD_LAUNCHER_PARAM(ElasticHostFailureLimit,
    .name = "HVD_ELASTIC_HOST_FAILURE_LIMIT",
    .type = ParamType::Int, .defaultValue = "3", .min = 1, .max = 1000,
    .flag = {.names = "--blacklist-failure-limit", .kind = ValueKind::Integer,
             .target = FlagTarget::Launcher,
             .group = FlagGroup::Elastic,
             .help = "Worker failures on one host, with no round formed since, that blacklist it"},
    .description = "How many of a host's workers may fail before hvdrun blacklists the host in "
                   "an elastic job (`--blacklist-failure-limit`; read by hvdrun): a failed "
                   "worker is replaced on its own slot, and the host's other workers go on with "
                   "their state; the count restarts each time a round with the host's workers "
                   "forms. 1 blacklists a host at its first failure, as Horovod does. A host "
                   "whose SSH check fails is blacklisted at once.")

HVD_LAUNCHER_PARAM(SshConcurrency,
    .name = "HVD_SSH_CONCURRENCY",
    .type = ParamType::Int, .defaultValue = "32", .min = 1, .max = 4096,
    .flag = {.names = "--ssh-concurrency", .kind = ValueKind::Integer,
             .target = FlagTarget::Launcher,
             .group = FlagGroup::Ssh,
             .help = "Remote hosts to connect to and check at once; the others wait their turn"},
    .description = "Remote hosts hvdrun connects to and checks over SSH at once "
                   "(`--ssh-concurrency`; read by hvdrun, 1 to 4096). The other hosts wait for a "
                   "free slot; each host keeps the connection it was checked on for its ranks, so "
                   "a slot is needed once per host. Raise it when hosts are slow to answer and "
                   "hvdrun's machine has cores to spare; lower it when a bastion or firewall "
                   "limits new connections.")

HVD_LAUNCHER_PARAM(LaunchAgent,
    .name = "HVD_LAUNCH_AGENT",
    .type = ParamType::String, .defaultValue = "",
    .flag = {.names = "--launch-agent", .kind = ValueKind::Text,
             .target = FlagTarget::Launcher,
             .group = FlagGroup::Ssh,
             .help = "Start every worker as 'AGENT HOST COMMAND...' on this machine instead of "
                     "here or over SSH"},
    .description = "An executable hvdrun runs on its own machine in place of each worker, as "
                   "`AGENT HOST COMMAND [ARGS...]`, with the worker's environment "
                   "(`--launch-agent`; read by hvdrun): for hosts a cluster's own scheduler "
                   "starts processes on. The agent's output and exit status are the worker's; "
                   "SIGTERM must stop the worker. `hvd.ray.RayExecutor`'s elastic jobs start "
                   "their workers as Ray actors this way ([cli.md](cli.md#launch-agents)).")

HVD_LAUNCHER_PARAM(LaunchAgentEnv,
    .name = "HVD_LAUNCH_AGENT_ENV",
    .type = ParamType::String, .defaultValue = "",
    .description = "Set by hvdrun for a launch agent: the comma-separated names of the "
                   "variables the agent must give the worker where it runs (those an SSH start "
                   "forwards).")

HVD_PARAM(OpTimeout, opTimeout, seconds,
    .name = "HVD_OP_TIMEOUT",
    .type = ParamType::Int, .defaultValue = "300", .min = 1, .max = 86400,
    .description = "Seconds a collective waits on a peer (or a GPU collective on the GPU) before "
                   "failing with a timeout that names it; a hung NCCL communicator is aborted. A "
                   "wait on a handle gives up after twice this, as a safety net behind the "
                   "engine's own, more specific, failure.")
// clang-format on
