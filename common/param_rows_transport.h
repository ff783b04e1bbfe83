// Rows of the parameter table (common/param_table.h): how host-memory and GPU collectives travel:
// algorithms, transports, polling, binding.
// Included by common/param_rows.h only, once per expansion of the rows: no include guard.
// One row per parameter, laid out as a table rather than as code:
// clang-format off

HVD_OPTION(AllreduceRingThreshold, Executor, std::size_t, ringThresholdBytes, asIs,
    .name = "HVD_ALLREDUCE_RING_THRESHOLD",
    .type = ParamType::Int, .defaultValue = "131072", .min = 0, .max = INT64_MAX,
    .description = "Allreduce payloads of at least this many bytes use the pipelined ring; smaller"
                   " ones use recursive doubling (with `HVD_ALLREDUCE_ALGORITHM=auto`).")

HVD_PARAM(NetworkModel, networkModel, networkModel,
    .name = "HVD_NETWORK_MODEL",
    .type = ParamType::String, .defaultValue = "",
    .unsetMeans = "this host's calibration, else built in",
    .description = "A JSON file describing the cluster for `HVD_ALLREDUCE_ALGORITHM=auto`'s cost "
                   "model, such as `hvd-bench calibrate --save FILE` writes on a cluster's "
                   "hosts. Unset, a job within one host reads the file calibrate saved for "
                   "this host (`$XDG_CACHE_HOME/hvd/network_model-<host>.json`, `~/.cache` "
                   "without XDG_CACHE_HOME) when there is one; a job (or an elastic round) "
                   "across hosts uses the built-in model, which every rank agrees on. A model's "
                   "`measured_allreduce` tables (each algorithm's time by size over `shm` or "
                   "`tcp`, measured on a layout of `ranks` ranks and `ranks_per_host` per host) "
                   "pick the algorithm on communicators of that layout, in place of the "
                   "formulas across hosts and of `HVD_ALLREDUCE_RING_THRESHOLD` within one. "
                   "Fields: `intra_host_latency_seconds`, "
                   "`intra_host_bytes_per_second` (shared memory), "
                   "`same_host_tcp_latency_seconds`, `same_host_tcp_bytes_per_second` (TCP "
                   "within a host, as a job of several hosts is linked), "
                   "`host_memory_bytes_per_second`, "
                   "`inter_host_latency_seconds`, `inter_host_bytes_per_second`, "
                   "`nic_memory_copies` (what a byte arriving through the NIC costs the host's "
                   "memory, in copies: 1 for TCP, about 0.5 for RDMA), "
                   "`switch_hop_latency_seconds`, `uplink_bytes_per_second`, "
                   "`reduce_bytes_per_second`, `hosts_per_switch` (any subset; the rest keep the "
                   "built-in values: 100 Gb/s NICs, 5 us). Ranks per host come from the job. Must "
                   "be the same on every rank (init checks). A file that cannot be read or parsed,"
                   " or an unknown field, fails init naming the file and field.")

HVD_OPTION(AllreduceAlgorithm, Executor, collectives::AllreduceAlgorithm, allreduceAlgorithm, asIs,
    .name = "HVD_ALLREDUCE_ALGORITHM",
    .type = ParamType::String, .defaultValue = "auto",
    .choices = {"auto", "ring", "recursive_doubling", "rabenseifner"},
    .flag = {.names = "--allreduce-algorithm", .kind = ValueKind::Text,
             .help = "Host allreduce's algorithm: auto: across hosts the cost model's pick "
                     "(HVD_NETWORK_MODEL), flat or hierarchical, within a host recursive doubling below "
                     "HVD_ALLREDUCE_RING_THRESHOLD and the ring from there (default); or force "
                     "ring, recursive_doubling or rabenseifner"},
    .description = "Algorithm of host-memory allreduce "
                   "([architecture.md](architecture.md#collectives) has each one's rounds and "
                   "bytes). `auto`: across hosts, the algorithm the cost model "
                   "(`HVD_NETWORK_MODEL`) predicts fastest, including, on hosts of several "
                   "ranks each, the hierarchical form, size by size; within one host by payload "
                   "size, "
                   "recursive doubling below `HVD_ALLREDUCE_RING_THRESHOLD` and the ring from "
                   "there; `ring`: the pipelined ring, 2(n-1) rounds, bandwidth-optimal; "
                   "`recursive_doubling`: log2 n rounds of whole-buffer exchanges, "
                   "latency-optimal; `rabenseifner`: reduce-scatter by recursive halving and "
                   "allgather by recursive doubling, 2 log2 n rounds moving as many bytes as the "
                   "ring (any n; non-powers of two fold neighbouring ranks in pairs). With "
                   "`HVD_HIERARCHICAL_ALLREDUCE=1` every size runs in stages and this picks their "
                   "stage across hosts; a named algorithm keeps allreduce flat; GPU tensors through "
                   "NCCL are not affected. Must be the "
                   "same on every rank. Anything else fails init naming the variable and the valid"
                   " values. Set by `hvdrun --allreduce-algorithm`.")

HVD_OPTION(SegmentBytes, Executor, std::size_t, segmentBytes, asIs,
    .name = "HVD_SEGMENT_BYTES",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1 << 30,
    .description = "Largest message of allreduce's pipelined ring, of the broadcast chain and of "
                   "scatter-allgather's ring (the ring uses about a quarter of a block, at least "
                   "128 KiB). 0: the transport's, "
                   "524288 (512 KiB) over TCP, where fewer system calls win, and 131072 (128 KiB) "
                   "over shared memory, where segments that stay in the core's cache win (4 and 16"
                   " MiB allreduces 9-12% faster on this project's machine). Otherwise at least "
                   "1024.")

HVD_PARAM(SocketBufferBytes, socketBufferBytes, asIs,
    .name = "HVD_SOCKET_BUFFER_BYTES",
    .type = ParamType::Int, .defaultValue = "4194304", .min = 0, .max = 1 << 30,
    .description = "`SO_SNDBUF`/`SO_RCVBUF` of worker links, set before connecting (capped by "
                   "`net.core.[rw]mem_max`); 0 keeps the kernel's autotuning.")

HVD_PARAM(Transport, transport, asIs,
    .name = "HVD_TRANSPORT",
    .type = ParamType::String, .defaultValue = "auto",
    .choices = {"auto", "tcp", "shm"},
    .flag = {.names = "--transport", .kind = ValueKind::Text,
             .help = "auto: shared memory between ranks when all are on one host, else TCP "
                     "(default); tcp: always TCP; shm: shared memory or fail"},
    .shortcut = {.name = "--tcp", .value = "tcp",
    .help = "Same as --transport tcp (horovodrun's flag)"},
    .description = "How ranks' host-memory links travel. `auto`: shared memory when every rank of "
                   "the job is on one host (falling back to TCP, with a warning naming the rank "
                   "and the reason, when any rank cannot use it), else TCP; `tcp`: always TCP; "
                   "`shm`: shared memory, and init fails with the reason when it cannot be used "
                   "(same as `hvdrun --transport`).")

HVD_PARAM(ShmBufferBytes, shmBufferBytes, asIs,
    .name = "HVD_SHM_BUFFER_BYTES",
    .type = ParamType::Int, .defaultValue = "1048576", .min = 4096, .max = 1 << 30,
    .description = "Bytes of each shared-memory ring, a multiple of 64 (4096 to 1 GiB). Each "
                   "rank's segment in `/dev/shm` holds one such ring per local peer, and its "
                   "control links' segment one of 64 KiB (or this, if smaller), so a host with L "
                   "ranks needs room for L·(L-1)·(this + 64 KiB) in `/dev/shm` (60 MiB for 8 "
                   "ranks), of which it takes a ring's share when two ranks first use it.")

HVD_OPTION(SpinMicroseconds, Engine, std::chrono::microseconds, spinTime, microseconds,
    .name = "HVD_SPIN_MICROSECONDS",
    .type = ParamType::Int, .defaultValue = "30", .min = 0, .max = 100000,
    .description = "Microseconds the engine keeps polling its links after its last activity, a "
                   "collective the engine runs polls for a message of at most 64 KiB before it "
                   "sleeps on the peer, and a caller waiting on an operation (`wait`, "
                   "`synchronize`) polls for its result before it sleeps. A message or result that"
                   " arrives within it costs no kernel wake-up (slow on a VM whose idle vCPUs "
                   "halt); between polls the thread yields its core to any other runnable "
                   "thread. 0 always sleeps at once. The engine polls through a larger transfer "
                   "only while a caller is blocked waiting on an operation: otherwise polling "
                   "would take CPU from the training step that shares the engine's core. A poll "
                   "also stops once a quarter of its yields (two at least) took over 50 us "
                   "each (other threads were waiting for the core: more ranks than cores several "
                   "times over), and the next waits sleep at once, polling again now and then "
                   "to look.")

HVD_PARAM(DirectSpinMicroseconds, directSpinTime, microseconds,
    .name = "HVD_DIRECT_SPIN_MICROSECONDS",
    .type = ParamType::Int, .defaultValue = "2000", .min = 0, .max = 1000000,
    .description = "Microseconds a collective called directly, not through the engine "
                   "(`hvd-bench`'s sweeps), polls for each message of any size before it sleeps, "
                   "as MPI's blocking calls do: its caller has nothing else to do meanwhile. On "
                   "this project's VM, where each sleep on a large transfer cost a slow wake-up, "
                   "256 KiB-4 MiB allreduces were 10-30% faster with it (docs/performance.md). 0 "
                   "always sleeps at once. As with `HVD_SPIN_MICROSECONDS`, a poll stops where "
                   "the core is contended. Where a host's ranks outnumber the CPUs they may run "
                   "on (no binding by hvd could give each its own), another rank can always use "
                   "the core a waiter would poll on: there a direct collective waits as the "
                   "engine's do, polling for a message of at most 64 KiB for "
                   "`HVD_SPIN_MICROSECONDS` (or this, if shorter) and sleeping at once on a "
                   "larger one (8 and 16 ranks on 2 cores, 4 fake hosts of 4 and 8 of 8: 10-28% "
                   "faster at 256 KiB). Rank 0 logs it.")

HVD_PARAM(BindTo, cpuBinding, asIs,
    .name = "HVD_BIND_TO",
    .type = ParamType::String, .defaultValue = "core",
    .choices = {"core", "none"},
    .flag = {.names = "--bind-to", .kind = ValueKind::Text,
             .help = "core: bind each worker to its local rank's share of the host's CPUs when "
                     "there are at least as many CPUs as local ranks (default); none: do not bind"},
    .description = "`core`: a worker started by hvdrun binds all its threads (also ones started "
                   "before `hvd.init()`) to its local rank's share of the CPUs it may use, as "
                   "`mpirun --bind-to core` does: with L local ranks and C allowed CPUs, local "
                   "rank i gets the i-th of L contiguous slices. Child processes inherit it. A "
                   "host with fewer CPUs than local ranks stays unbound (ranks share cores either "
                   "way); ranks started by srun or mpirun keep their launcher's binding. `none`: "
                   "no binding (when something else on the host needs those cores). Anything else "
                   "is an error naming the variable. Set by `hvdrun --bind-to`.")

HVD_PARAM(MallocRetainMb, mallocRetainBytes, mebibytes,
    .name = "HVD_MALLOC_RETAIN_MB",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 2047,
    .flag = {.names = "--malloc-retain-mb", .kind = ValueKind::Integer,
             .help = "Workers' malloc serves blocks up to this size from its heap and keeps up to"
                     " this much freed memory for reuse, so CPU training stops re-faulting its "
                     "activations every step; 0: glibc's defaults"},
    .configKey = {.key = "params.malloc_retain_mb", .kind = ValueKind::Integer},
    .description = "At init, the worker's malloc (glibc's) is set to serve blocks of up to this "
                   "many MB from its heap and to keep up to this many MB of freed memory there, "
                   "instead of mapping each large block afresh and returning it to the kernel when"
                   " freed (`mallopt` `M_MMAP_THRESHOLD` and `M_TRIM_THRESHOLD`). CPU training "
                   "that allocates the same activations every step then stops spending kernel time"
                   " zero-filling their pages: the MNIST example trained 13-16% faster on this "
                   "project's machine ([troubleshooting.md](troubleshooting.md), "
                   "[performance.md](performance.md)). The cost is up to that much freed memory "
                   "kept in each worker. 0..2047; 0 keeps glibc's defaults (or "
                   "`MALLOC_MMAP_THRESHOLD_`/`MALLOC_TRIM_THRESHOLD_`). Anything else, or a C "
                   "library that is not glibc, is an error naming the variable. Set by `hvdrun "
                   "--malloc-retain-mb`.")

HVD_PARAM(GradientOverlap, gradientOverlap, asIs,
    .name = "HVD_GRADIENT_OVERLAP",
    .type = ParamType::String, .defaultValue = "auto",
    .choices = {"auto", "on", "off"},
    .flag = {.names = "--gradient-overlap", .kind = ValueKind::Text,
             .help = "When DistributedOptimizer starts each gradient's allreduce: on: from its "
                     "backward hook; off: at step(); auto: off for host-memory gradients when all"
                     " ranks are on one host and compute fills their CPUs, else on (default)"},
    .configKey = {.key = "params.gradient_overlap", .kind = ValueKind::Text},
    .description = "When `hvd.torch.DistributedOptimizer` starts each gradient's allreduce. `on`: "
                   "from the gradient's backward hook, as soon as backward has accumulated it, so "
                   "communication overlaps the rest of backward (Horovod's way). `off`: all of "
                   "them when `step()` or `synchronize()` is called. `auto`: off for a gradient in"
                   " host memory when every rank of the job is on one host and torch's intra-op "
                   "threads (`torch.get_num_threads()`) are at least the rank's share of the CPUs "
                   "(its binding's CPUs, or the allowed CPUs divided by the local ranks when "
                   "unbound), on otherwise (GPU gradients, ranks on several hosts, or a spare "
                   "core), decided per parameter when the optimizer is created. Then, moving "
                   "host-memory gradients is CPU work (copies and reductions through shared "
                   "memory) on the cores backward is using, so overlapping only makes the two take"
                   " turns: on this project's 2-core machine the MNIST CNN trained 1-4% faster "
                   "with off, and a model of 300 small gradients 11% faster "
                   "([performance.md](performance.md)). Across hosts the transfer waits on the "
                   "network while the cores compute, and a spare core runs it beside backward; "
                   "overlapping hides it. `DistributedOptimizer(gradient_overlap=...)` overrides "
                   "it for one optimizer. Set by `hvdrun --gradient-overlap`.")

HVD_PARAM(CheckReplicas, checkReplicasEvery, checkReplicas,
    .name = "HVD_CHECK_REPLICAS",
    .type = ParamType::String, .defaultValue = "first",
    .flag = {.names = "--check-replicas", .kind = ValueKind::Text,
             .help = "Check that every rank holds the same trainable weights: first: once, at the"
                     " start of training (default); every:N: also every N updates; off: never"},
    .configKey = {.key = "params.check_replicas", .kind = ValueKind::Text},
    .description = "The replica check "
                   "([python.md](python.md#the-replica-check-every-rank-must-hold-the-same-"
                   "weights)):"
                   " whether the frontends' optimizers check that every rank holds the same "
                   "trainable weights. `first`: once, at the start of training, after the "
                   "broadcast of the framework's Horovod recipe (`hvd.torch`: after the first "
                   "update; Keras and the TF1 `DistributedOptimizer`: before it, or after it when "
                   "the Keras callback broadcasts at the end of the first batch; "
                   "`DistributedGradientTape`: after it, as its recipe broadcasts after the first "
                   "step); `every:N`: then, and after every N-th update; `off`: never. A mismatch "
                   "fails the job on every rank of the optimizer's process set with "
                   "`ReplicaMismatchError`, naming the ranks that differ from the set's first rank"
                   " and the first differing variable. One check costs one small allreduce and a "
                   "pass over the weights ([performance.md](performance.md#replica-check)). "
                   "Anything else (`every:0`, `sometimes`) fails init naming the variable. Set by "
                   "`hvdrun --check-replicas` or the config file's `params.check_replicas`.")

HVD_OPTION(GpuBackend, Executor, bool, gpuUseNccl, isNccl,
    .name = "HVD_GPU_BACKEND",
    .type = ParamType::String, .defaultValue = "nccl",
    .choices = {"nccl", "staged"},
    .description = "How collectives on GPU tensors travel. `nccl`: GPU to GPU through NCCL when "
                   "every rank of the communicator has a GPU of its own, else through host memory "
                   "with one warning saying why; `staged`: always through host memory and the TCP "
                   "algorithms. CUDA builds only.")

HVD_PARAM(HierarchicalAllreduce, hierarchicalAllreduce, asIs,
    .name = "HVD_HIERARCHICAL_ALLREDUCE", .horovodAlias = "HOROVOD_HIERARCHICAL_ALLREDUCE",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--hierarchical-allreduce,!--no-hierarchical-allreduce",
             .kind = ValueKind::Switch,
             .help = "Allreduce within each host (shared memory, or NCCL for GPU tensors), across"
                     " hosts over TCP, then within each host again; needs as many ranks on every "
                     "host (the no- form overrides a config file)"},
    .configKey = {.key = "params.hierarchical_allreduce", .kind = ValueKind::Switch},
    .description = "`1`: on a job over several hosts with as many ranks each (hosts as "
                   "`HVD_HOSTNAME` names them), allreduce runs in three stages. Host memory, every"
                   " op: a ring reduce-scatter among the ranks of each host over shared memory "
                   "(TCP where shared memory is unavailable or `HVD_TRANSPORT=tcp`), an allreduce "
                   "of each rank's part with the ranks of the same local index on the other hosts "
                   "over TCP, a ring allgather within the host; uneven hosts stay flat with a "
                   "warning (see docs/performance.md for the measured gain). Every rank must have "
                   "the same setting: a job where it differs fails at init naming the ranks. For "
                   "GPU tensors (CUDA builds), Sum and Average allreduces run in three stages too:"
                   " NCCL reduce-scatter among the ranks of each host, an allreduce of each rank's"
                   " part with the ranks of the same local index on the other hosts through host "
                   "memory and the TCP ring, NCCL allgather within the host. For clusters whose "
                   "inter-host network NCCL uses poorly. Needs NCCL (every rank a GPU of its own),"
                   " more than one host and as many ranks on every host (hosts as `HVD_HOSTNAME` "
                   "names them); otherwise allreduce stays flat, with a warning for uneven hosts. "
                   "Min, Max, Product of GPU tensors and the other operations always run flat; so "
                   "do process sets other than the global one. Set by `hvdrun "
                   "--hierarchical-allreduce` or the config file's "
                   "`params.hierarchical_allreduce`.")

HVD_PARAM(HierarchicalAllgather, hierarchicalAllgather, asIs,
    .name = "HVD_HIERARCHICAL_ALLGATHER", .horovodAlias = "HOROVOD_HIERARCHICAL_ALLGATHER",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--hierarchical-allgather,!--no-hierarchical-allgather",
             .kind = ValueKind::Switch,
             .help = "Allgather host memory across hosts over TCP, then within each host over "
                     "shared memory; needs as many ranks on every host (the no- form overrides a "
                     "config file)"},
    .configKey = {.key = "params.hierarchical_allgather", .kind = ValueKind::Switch},
    .description = "`1`: on a job over several hosts with as many ranks each (hosts as "
                   "`HVD_HOSTNAME` names them), allgathers of host memory run in two stages: the "
                   "ranks of the same local index on every host gather their blocks across hosts "
                   "over TCP, then each host's ranks gather those over shared memory (TCP where "
                   "shared memory is unavailable or `HVD_TRANSPORT=tcp`); uneven hosts stay flat "
                   "with a warning. Every rank must have the same setting: a job where it differs "
                   "fails at init naming the ranks. GPU tensors through NCCL and process sets "
                   "other than the global one stay flat. Set by `hvdrun --hierarchical-allgather` "
                   "or the config file's `params.hierarchical_allgather`.")
// clang-format on
