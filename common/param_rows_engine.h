// Rows of the parameter table (common/param_table.h): the engine (fusion, autotune, the response
// cache, the timeline, the stall inspector), process sets and logging.
// Included by common/param_rows.h only, once per expansion of the rows: no include guard.
// One row per parameter, laid out as a table rather than as code:
// clang-format off

HVD_OPTION(FusionThreshold, Coordinator, std::size_t, fusionThresholdBytes, asIs,
    .name = "HVD_FUSION_THRESHOLD", .horovodAlias = "HOROVOD_FUSION_THRESHOLD",
    .type = ParamType::Int, .defaultValue = "134217728", .min = 0, .max = int64_t{1} << 40,
    .flag = {.names = "--fusion-threshold-mb", .kind = ValueKind::Megabytes,
             .help = "Fusion buffer size in MB; 0 turns fusion off"},
    .configKey = {.key = "params.fusion_threshold_mb", .kind = ValueKind::Megabytes},
    .description = "Bytes of ready allreduce tensors packed into one fusion buffer and reduced as "
                   "one; 0 turns fusion off. Tensors of 256 KiB or more always run alone (the copy"
                   " would cost more than it saves). When all ranks are on one host, a fused group"
                   " is reduced in pieces of (ranks x 64 KiB) through a buffer of that size "
                   "(architecture.md, the engine); across hosts the host buffer grows to the "
                   "largest group.")

HVD_OPTION(InlineAllreduceBytes, Engine, std::size_t, inlineAllreduceBytes, asIs,
    .name = "HVD_INLINE_ALLREDUCE_BYTES",
    .type = ParamType::Int, .defaultValue = "256", .min = 0, .max = 65536,
    .description = "Host-memory allreduces of at most this many bytes (all tensors of the "
                   "operation together: a loss, a metric, a counter) travel with their negotiation"
                   " request; rank 0 reduces them and sends the result with its reply, so no "
                   "collective runs and a lone small allreduce takes two trips between ranks "
                   "instead of three (the engine's 4-byte latency: docs/performance.md). "
                   "Results are bit-identical on every rank. When a "
                   "rank has joined, or some rank's own limit is below the operation's size, the "
                   "allreduce runs as a collective. At most 65536; 0 turns it off.")

HVD_OPTION(CycleTime, Coordinator, std::chrono::microseconds, cycleTime, milliseconds,
    .name = "HVD_CYCLE_TIME", .horovodAlias = "HOROVOD_CYCLE_TIME",
    .type = ParamType::Double, .defaultValue = "0", .min = 0, .max = 10000,
    .flag = {.names = "--cycle-time-ms", .kind = ValueKind::Number,
             .help = "Hold ready work this long to fuse more; 0 runs it at once"},
    .configKey = {.key = "params.cycle_time_ms", .kind = ValueKind::Number},
    .description = "Milliseconds (fractions allowed) the coordinator holds ready work to fuse "
                   "more; 0 runs work as soon as every rank has submitted it.")

HVD_OPTION(Autotune, Autotune, bool, enabled, asIs,
    .name = "HVD_AUTOTUNE", .horovodAlias = "HOROVOD_AUTOTUNE",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--autotune", .kind = ValueKind::Switch,
             .help = "Rank 0 tunes the fusion threshold and cycle time while the job trains, then"
                     " keeps the best; a knob given explicitly stays fixed"},
    .configKey = {.key = "autotune.enabled", .kind = ValueKind::Switch},
    .description = "1: rank 0 tunes `HVD_FUSION_THRESHOLD` and `HVD_CYCLE_TIME` while the job "
                   "trains, then keeps the best setting ([Autotune](#autotune) below). A knob set "
                   "explicitly stays as set; setting both is an error. Same as `hvdrun "
                   "--autotune`.")

HVD_OPTION(AutotuneLog, Autotune, std::string, logPath, asIs,
    .name = "HVD_AUTOTUNE_LOG", .horovodAlias = "HOROVOD_AUTOTUNE_LOG",
    .type = ParamType::String, .defaultValue = "",
    .flag = {.names = "--autotune-log-file", .kind = ValueKind::Text,
             .help = "CSV file rank 0 appends each autotune sample and the choice to"},
    .configKey = {.key = "autotune.log_file", .kind = ValueKind::Text},
    .description = "CSV file rank 0 appends a row per autotune sample to, and last the chosen "
                   "setting. Needs `HVD_AUTOTUNE=1` (an error otherwise).")

HVD_OPTION(AutotuneWarmupSamples, Autotune, int, warmupSamples, asIs,
    .name = "HVD_AUTOTUNE_WARMUP_SAMPLES", .horovodAlias = "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
    .type = ParamType::Int, .defaultValue = "3", .min = 0, .max = 100000,
    .flag = {.names = "--autotune-warmup-samples", .kind = ValueKind::Integer,
             .help = "Samples discarded at the start"},
    .configKey = {.key = "autotune.warmup_samples", .kind = ValueKind::Integer},
    .description = "Samples at the start, with the configured setting, that are discarded.")

HVD_OPTION(AutotuneStepsPerSample, Autotune, int, stepsPerSample, asIs,
    .name = "HVD_AUTOTUNE_STEPS_PER_SAMPLE", .horovodAlias = "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
    .type = ParamType::Int, .defaultValue = "10", .min = 1, .max = 1000000,
    .flag = {.names = "--autotune-steps-per-sample", .kind = ValueKind::Integer,
             .help = "Training steps per sample"},
    .configKey = {.key = "autotune.steps_per_sample", .kind = ValueKind::Integer},
    .description = "Training steps per sample.")

HVD_OPTION(AutotuneBayesOptMaxSamples, Autotune, int, maxSamples, asIs,
    .name = "HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
    .horovodAlias = "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
    .type = ParamType::Int, .defaultValue = "20", .min = 1, .max = 200,
    .flag = {.names = "--autotune-bayes-opt-max-samples", .kind = ValueKind::Integer,
             .help = "Samples measured before the best setting is kept"},
    .configKey = {.key = "autotune.bayes_opt_max_samples", .kind = ValueKind::Integer},
    .description = "Samples measured after the warm-up before the best setting is kept (at most "
                   "200).")

HVD_OPTION(AutotuneGaussianProcessNoise, Autotune, double, noise, asIs,
    .name = "HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
    .horovodAlias = "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
    .type = ParamType::Double, .defaultValue = "0.8", .min = 0, .max = 1,
    .flag = {.names = "--autotune-gaussian-process-noise", .kind = ValueKind::Number,
             .help = "Noise assumed in one sample's score, relative to the scores' variance"},
    .configKey = {.key = "autotune.gaussian_process_noise", .kind = ValueKind::Number},
    .description = "Noise the search assumes in one sample's score, as a share of the scores' "
                   "variance; higher trusts single samples less.")

HVD_OPTION(CacheCapacity, Coordinator, std::size_t, cacheCapacity, asIs,
    .name = "HVD_CACHE_CAPACITY", .horovodAlias = "HOROVOD_CACHE_CAPACITY",
    .type = ParamType::Int, .defaultValue = "1024", .min = 0, .max = 1 << 20,
    .flag = {.names = "--cache-capacity", .kind = ValueKind::Integer,
             .help = "Response cache entries; 0 turns it off"},
    .configKey = {.key = "params.cache_capacity", .kind = ValueKind::Integer},
    .description = "Operations the response cache remembers; repeated steps then send an id "
                   "instead of the description. 0 turns it off.")

HVD_OPTION(Timeline, Engine, std::string, timelinePath, asIs,
    .name = "HVD_TIMELINE", .horovodAlias = "HOROVOD_TIMELINE",
    .type = ParamType::String, .defaultValue = "",
    .flag = {.names = "--timeline-filename", .kind = ValueKind::Text,
             .help = "Rank 0 writes a Chrome-trace timeline here"},
    .configKey = {.key = "timeline.filename", .kind = ValueKind::Text},
    .description = "Rank 0 writes a Chrome-trace/Perfetto timeline here; valid JSON even after "
                   "Ctrl-C. One row per tensor, named as Horovod names it (`allreduce.grad0`; "
                   "unnamed: `allreduce.noname.3`), with its phases: `NEGOTIATE_ALLREDUCE`, "
                   "`MEMCPY_IN_FUSION_BUFFER`, `ALLREDUCE` (`HIERARCHICAL_…`, `NCCL_…` for the "
                   "algorithm or backend that ran it), `MEMCPY_OUT_FUSION_BUFFER`.")

HVD_OPTION(TimelineMarkCycles, Engine, bool, timelineMarkCycles, asIs,
    .name = "HVD_TIMELINE_MARK_CYCLES", .horovodAlias = "HOROVOD_TIMELINE_MARK_CYCLES",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--timeline-mark-cycles", .kind = ValueKind::Switch,
             .help = "Mark each list of work rank 0 dispatches in the timeline"},
    .configKey = {.key = "timeline.mark_cycles", .kind = ValueKind::Switch},
    .description = "1: the timeline also has a `CYCLE_START` instant event for each list of work "
                   "rank 0 dispatches. hvd has no fixed cycle (work starts when ready), so the "
                   "marks show when negotiation released work; with `HVD_CYCLE_TIME` they are at "
                   "most one per cycle. `hvd.start_timeline(path, mark_cycles=True)` does the same"
                   " for a timeline started at run time. Needs `HVD_TIMELINE` (an error "
                   "otherwise).")

HVD_LAUNCHER_PARAM(HorovodCompat,
    .name = "HVD_HOROVOD_COMPAT",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--horovod-compat", .kind = ValueKind::Switch,
             .group = FlagGroup::Main,
             .help = "Let 'import horovod.torch as hvd' run on hvd: put hvd's horovod "
                     "compatibility package on the workers' PYTHONPATH"},
    .description = "1 makes hvdrun put hvd's `horovod` compatibility package on the workers' "
                   "`PYTHONPATH` (same as `--horovod-compat`); see [python.md](python.md).")

HVD_OPTION(StallCheckDisable, Coordinator, bool, stallCheck, negated,
    .name = "HVD_STALL_CHECK_DISABLE", .horovodAlias = "HOROVOD_STALL_CHECK_DISABLE",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--no-stall-check", .kind = ValueKind::Switch,
             .help = "Turn the stall inspector off"},
    .configKey = {.key = "stall_check.enabled", .kind = ValueKind::NegatedSwitch},
    .description = "1 turns the stall inspector off.")

HVD_OPTION(StallCheckTimeSeconds, Coordinator, std::chrono::seconds, stallWarning, seconds,
    .name = "HVD_STALL_CHECK_TIME_SECONDS", .horovodAlias = "HOROVOD_STALL_CHECK_TIME_SECONDS",
    .type = ParamType::Int, .defaultValue = "60", .min = 1, .max = 86400,
    .flag = {.names = "--stall-check-warning-time-seconds", .kind = ValueKind::Integer,
             .help = "Report operations some ranks have not submitted after this long"},
    .configKey = {.key = "stall_check.warning_time_seconds", .kind = ValueKind::Integer},
    .description = "Rank 0 logs operations some ranks have not submitted after this long, with the"
                   " missing ranks. Inside a collective, a send or receive whose transfer has not "
                   "moved for this long is logged by the waiting rank (`stall: rank 0/2: recv from"
                   " rank 1 (...) ...: no data moved for 60 s (N of M bytes done)`, and over "
                   "shared memory the peer process's state from `/proc`: stopped, uninterruptible,"
                   " zombie).")

HVD_OPTION(StallShutdownTimeSeconds, Coordinator, std::chrono::seconds, stallShutdown, seconds,
    .name = "HVD_STALL_SHUTDOWN_TIME_SECONDS",
    .horovodAlias = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
    .type = ParamType::Int, .defaultValue = "300", .min = 0, .max = 86400,
    .flag = {.names = "--stall-check-shutdown-time-seconds", .kind = ValueKind::Integer,
             .help = "Fail the job when an operation stalls this long; 0 never"},
    .configKey = {.key = "stall_check.shutdown_time_seconds", .kind = ValueKind::Integer},
    .description = "After this long the job fails with the stall report (0: wait forever); so does"
                   " a transfer inside a collective that has not moved for this long. Horovod's "
                   "default is to wait forever; ours is finite so a job never hangs silently, and "
                   "5 minutes leaves room for a slow checkpoint or evaluation on some ranks. Must "
                   "not be below the warning time. A stopped or cut-off rank is caught sooner by "
                   "`HVD_LIVENESS_TIMEOUT_SECONDS`.")

HVD_OPTION(LivenessTimeoutSeconds, Engine, std::chrono::milliseconds, livenessTimeout, seconds,
    .name = "HVD_LIVENESS_TIMEOUT_SECONDS",
    .type = ParamType::Int, .defaultValue = "60", .min = 0, .max = 86400,
    .configKey = {.key = "stall_check.liveness_timeout_seconds", .kind = ValueKind::Integer},
    .description = "Every rank's engine sends a sign of life each second (rank 0 to every rank, "
                   "the others to rank 0), also from inside a collective's waits, where it reads "
                   "its peers' too. A peer silent for this long fails the job, naming it: its "
                   "process is stopped (SIGSTOP, a debugger, a paused VM or job), hung in the "
                   "kernel, or cut off. A rank busy in its training code (a long checkpoint on "
                   "rank 0) keeps sending, so it is not mistaken for one. With the default a "
                   "stopped rank ends the job in about 61 s, between operations or inside a "
                   "transfer. Collectives called without the engine (hvd-bench, the C API's "
                   "direct ones) send no heartbeats: there a transfer with a rank on the same "
                   "host fails when nothing moved for this long and the rank's process is "
                   "stopped. 0: never. Set by the config file's "
                   "`stall_check.liveness_timeout_seconds`.")

HVD_PARAM(ProcessSets, processSets, processSets,
    .name = "HVD_PROCESS_SETS",
    .type = ParamType::String, .defaultValue = "",
    .description = "Process sets created at init, rank lists separated by `;` (`0,1;2,3`); they "
                   "get ids 1, 2, ...")

HVD_PARAM(LogLevel, logLevel, asIs,
    .name = "HVD_LOG_LEVEL", .horovodAlias = "HOROVOD_LOG_LEVEL",
    .type = ParamType::String, .defaultValue = "warn",
    .flag = {.names = "--log-level", .kind = ValueKind::LogLevel,
             .group = FlagGroup::Main,
             .help = "Log level of hvdrun and its workers: trace, debug, info, warn, error, "
                     "critical, off (or Horovod's WARNING, FATAL, any case)"},
    .configKey = {.key = "logging.level", .kind = ValueKind::LogLevel},
    .description = "trace, debug, info, warn, error, critical, off; Horovod's `warning` and "
                   "`fatal` too, in any case (`HOROVOD_LOG_LEVEL=WARNING`). Set in hvdrun's "
                   "environment, it is hvdrun's level and its workers'; `--log-level` overrides "
                   "it.")

HVD_PARAM(LogHideTime, logHideTime, asIs,
    .name = "HVD_LOG_HIDE_TIME", .horovodAlias = "HOROVOD_LOG_HIDE_TIME",
    .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1,
    .flag = {.names = "--log-hide-timestamp", .kind = ValueKind::Switch,
             .group = FlagGroup::Main,
             .help = "Leave the date and time out of hvd's log lines"},
    .configKey = {.key = "logging.with_timestamp", .kind = ValueKind::NegatedSwitch},
    .description = "1 leaves the local date and time (`YYYY-MM-DD hh:mm:ss.mmm`) out of the start "
                   "of hvd's log lines (same as `--log-hide-timestamp`).")

HVD_PARAM(LogSubsys, logSubsystems, asIs,
    .name = "HVD_LOG_SUBSYS",
    .type = ParamType::String, .defaultValue = "",
    .unsetMeans = "all",
    .description = "Comma-separated subsystems to log: `runtime`, `engine`, `tcp`, `rdzv`, "
                   "`launcher`.")

// clang-format on
