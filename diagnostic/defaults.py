"""Every default of a measurement, in one place.

The bundle models, the plan file, the presets, collect's settings, the client's options and
both CLI commands read their defaults here; change one here and it changes everywhere.
"""

# Measured requests per restart and workload. Below this, per-restart means wobble enough to
# blur a 10% effect (docs/statistics.md): the plan warns and the checklist flags it.
MIN_REQUESTS = 15
REQUESTS = MIN_REQUESTS
WARMUP = 1  # discarded requests per restart and workload, before the measured ones
MAX_TOKENS = 256  # output length forced on every request (ignore_eos + min_tokens)
RESTARTS = 5  # server starts per arm in a sweep
# Requests per restart the time-on-site planner (sweep --adaptive) may choose from measured
# costs and noise (Kalibera & Jones m*): never below the floor (drift checks need 5), never
# above the cap (a restart that shows no noise of its own would otherwise ask for hundreds).
PLAN_MIN_REQUESTS = 5
PLAN_MAX_REQUESTS = 60
PLAN_HEALTH_STARTUPS = 3  # `diagnose plan`: a start may take this many measured mean start-ups
MIN_RESTARTS = 3  # below this an arm's interval cannot show the restart noise (checklist)
WORKLOADS = ("code", "prose")
CONCURRENCY = 1
# Streams one collect process carries before more are spread over worker processes (at most
# one per core); benchmarks/README.md "Many streams" has the measurement behind it.
STREAMS_PER_PROCESS = 256
SEED = 0
PORT = 8000  # substituted for {port} in a plan's templates
HEALTH_TIMEOUT_S = 600.0  # seconds a server start may take to answer its health check
REQUEST_TIMEOUT_S = 600.0  # seconds one request may take in all
READ_TIMEOUT_S = 120.0  # longest silence within a stream
FIRST_TOKEN_TIMEOUT_S = 300.0  # seconds from sending a request to its first token
TOKEN_TIMEOUT_S = 120.0  # longest wait between two tokens of a stream
RUN_TIMEOUT_S = 6 * 3600.0  # seconds one run (one server start) may measure: a day on site
CONNECT_TIMEOUT_S = 10.0
MAX_OUTPUT_BYTES = 32 * 1024 * 1024  # stream bytes kept per request before giving up
MARGIN = 0.02  # δ: EQUIVALENT inside [1/(1+δ), 1+δ] when no A/A arm calibrates the band
# The speedup an adaptive sweep is powered to find (+10%). At an interim look a comparison
# whose data reject it (one-sided t test at FUTILITY_ALPHA: the 95% interval's upper end below
# 1 + TARGET) can stop, INCONCLUSIVE: more restarts could not make it the win worth having.
# The stop is non-binding (it only ever ends an arm undecided), so it leaves the false-decision
# rate of the Pocock bound as it is and costs power, which the plan's maximum pays back
# (benchmarks/README.md "Time on site").
TARGET = 0.10
FUTILITY_ALPHA = 0.025
# The covariate adjustment's balance check (analyse/covariate.py): the covariate's difference
# between each arm and its reference, Bonferroni over the pairs at this family-wise level. Set
# far above 5%: a false alarm only costs the adjustment's gain, a move missed biases a verdict
# (docs/statistics.md "Covariate adjustment": at 10% a covariate the arm moves by 1 SD raised
# false decisions to 12-15%; at 50%, to 4-6%).
COVARIATE_BALANCE_ALPHA = 0.5
# Greedy output that first differs from the baseline's within this many characters (a few
# tokens) is suspect: a bug in drafting or acceptance shows there. Later differences are the
# expected numerics of batched verify (near-ties flip when k+1 tokens share one forward pass).
EARLY_DIVERGENCE_CHARS = 20
# Measuring time in a day on site (after setup, before the debrief): planning advice that
# needs more says the effect is too small to resolve in a day (report/budget.py).
DAY_ON_SITE_S = 6 * 3600.0
SHELL_TIMEOUT_S = 120.0  # seconds a plan's stop, health or log command may run once
# Bytes of a plan command's output kept (a node's log: its tail). Redaction reads about 0.5-2
# MB/s of log on one core, so a bigger tail costs minutes per fetch.
LOG_KEEP_BYTES = 8 << 20
# Under every plan command's environment (this process's and the arm's set over it): ssh
# never opens a window to ask for a password (a laptop's desktop, DISPLAY and ssh-askpass),
# which would hold the command until its timeout, with no one there to answer.
PLAN_COMMAND_ENV = {"SSH_ASKPASS_REQUIRE": "never"}
HEALTH_POLL_S = 2.0  # pause between two runs of a plan's health command

# Limits a plan file or a command line may not pass, refused at load with the limit named:
# past them a value is a typo or an attack, not a measurement (a day on site is 6 hours;
# 10^12 requests would never end, max_tokens 10^18 no server takes, a seed past 2^53 no JSON
# reader agrees on).
LIMIT_REQUESTS = 100_000  # measured requests per restart and workload
LIMIT_WARMUP = 10_000
LIMIT_RESTARTS = 1_000  # server starts per arm (and a --restart index)
LIMIT_MAX_TOKENS = 1_048_576  # the longest context any engine serves
LIMIT_CONCURRENCY = 16_384  # streams in flight (file descriptors, ports)
LIMIT_TIMEOUT_S = 86_400.0  # any timeout: a day
LIMIT_SEED = 2**53
LIMIT_ARMS = 1_000  # arms after sweep expansion
LIMIT_PLANNED_REQUESTS = 10_000_000  # requests a whole plan schedules, warm-ups included
LIMIT_PLAN_BYTES = 1_048_576  # a plan file
LIMIT_LOG_KEEP_BYTES = 1 << 30  # [plan] log_keep_bytes

# Telemetry (collect --telemetry, a plan's telemetry keys): GPU samples every
# TELEMETRY_INTERVAL_S (NVML reads take microseconds); the host's process table at most every
# TELEMETRY_HOST_INTERVAL_S (one pass over /proc costs milliseconds of CPU on a busy host).
# benchmarks/README.md "Telemetry" measures what sampling costs the measurement.
TELEMETRY_INTERVAL_S = 0.25
TELEMETRY_MIN_INTERVAL_S = 0.05
TELEMETRY_MAX_INTERVAL_S = 10.0
TELEMETRY_HOST_INTERVAL_S = 0.5
TELEMETRY_SCAN_INTERVAL_S = 2.0  # the whole process table (who else is busy), at most this often
TELEMETRY_START_S = 30.0  # longest wait for the recorder's first samples (it is spawned)
TELEMETRY_STOP_S = 15.0  # longest wait for its last sample and its report
# The quiet window before a run's first request (measure/telemetry/quiet.py), taken with local
# telemetry: half spinning, half sleeping in QUIET_TICK_S ticks. A few seconds: /proc/stat counts
# steal in 10 ms ticks, and a run's start-up takes far longer.
QUIET_WINDOW_S = 4.0
QUIET_MAX_S = 60.0
QUIET_TICK_S = 0.005
# The same probe during the run (the recorder's IdleProbe): a tick every QUIET_TICK_S, and every
# PROBE_SPIN_EVERY ticks a spin of PROBE_SPIN_S (under 1% of one core in all).
PROBE_SPIN_S = 0.0005
PROBE_SPIN_EVERY = 20
