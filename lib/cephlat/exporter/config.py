"""The exporter's settings (exporter/service.py), with the command line's
defaults: cli/exporter.py's options fill them (exporter_config)."""
from dataclasses import dataclass

from ..engine import DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S
from ..model.sample import DEFAULT_EVERY

DEFAULT_MAX_OVERHEAD = 1.0      # the cost bound, % of the host's CPU time
DEFAULT_REFRESH_S = 5.0         # between reads of the kernel's figures
# --otlp: 1 op in DEFAULT_OTLP_SAMPLE by request id (osdstage --otlp's),
# at most DEFAULT_OTLP_RATE traces a second from this exporter
DEFAULT_OTLP_SAMPLE = DEFAULT_EVERY
DEFAULT_OTLP_RATE = 50
# the full tier on at once when an OSD's op latency p99 in the lean tier
# is over this many times its baseline (exporter/tailwatch.py)
DEFAULT_ESCALATE_FACTOR = 2.0
# after an OSD fired, how long its same tail is let be
DEFAULT_ESCALATE_QUIET_S = 60.0
# --by: at most this many keys with series of their own per OSD
DEFAULT_BY_TOP = 10


@dataclass(frozen=True)
class ExporterConfig:
    """Which OSDs and tiers to trace, and how (each field the exporter's
    option of that name, as the command line parses it):

    osd: "all" or a list of OSD ids; tiers: "both", "lean" or "full";
    stages: the full tier's user-space stages (None: the default ones;
    "all": every one); release: the probe table's (None: asked from each binary);
    no_kernel: no kernel programs in the full tier; behind: the full
    tier also tells whom the threads waited behind for a CPU (a cost on
    every context switch of the host); max_ops: slots of the
    table of ops in flight; host_netns: trace only this network
    namespace's OSDs (a lab aid); max_overhead: the cost bound, % of the
    host's CPU time (0: none, the full tier always attached); refresh:
    seconds between reads into the sums; op_timeout: seconds after which
    an idle op is forgotten; otlp: the OTLP collector's URL that the ops
    chosen in the full tier are sent to as traces (None: none);
    otlp_sample: 1 op in N by request id (0: none); otlp_over: and the
    ops that took at least this long, us (None: no threshold);
    otlp_rate: at most this many traces a second (0: no cap);
    escalate_factor: the full tier on at once when an OSD's p99 in the
    lean tier is over this many times its baseline (0: never);
    escalate_over: and when an op took at least this long, us (None: no
    threshold); escalate_quiet: after an OSD fired, it does not fire
    again for this long, s (unless its tail gets worse); by: count the ops by client, pool, pg or image (None:
    not); by_top: at most this many keys with series of their own per
    OSD (exporter/bykey.py)."""
    osd: object = "all"
    tiers: str = "both"
    stages: object = None
    release: object = None
    no_kernel: bool = False
    behind: bool = False
    max_ops: int = DEFAULT_MAX_OPS
    host_netns: object = None
    max_overhead: float = DEFAULT_MAX_OVERHEAD
    refresh: float = DEFAULT_REFRESH_S
    op_timeout: float = DEFAULT_OP_TIMEOUT_S
    otlp: object = None
    otlp_sample: int = DEFAULT_OTLP_SAMPLE
    otlp_over: object = None
    otlp_rate: int = DEFAULT_OTLP_RATE
    escalate_factor: float = DEFAULT_ESCALATE_FACTOR
    escalate_over: object = None
    escalate_quiet: float = DEFAULT_ESCALATE_QUIET_S
    by: object = None
    by_top: int = DEFAULT_BY_TOP
