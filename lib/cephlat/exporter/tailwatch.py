"""When the exporter's full tier comes on at once: the lean tier, attached
all the time, sees each OSD's op latency tail every refresh, and when it
moves the full tier escalates (engine/duty.py DutyCycle.escalate: on at
once, within the same budget) so that the detail is there when it
matters, not only in the regular windows.

Per OSD, each refresh: the lean tier's op_latency (every op class), else
its op_total. It fires

- "p99": its 99th percentile over `factor` x the OSD's baseline, once the
  baseline has WARMUP intervals of at least MIN_OPS ops behind it; the
  baseline is a running mean of log p99 (weight WEIGHT a calm interval,
  WEIGHT / 4 one that fired: a lasting change becomes the new normal in
  a few minutes, and stops firing);
- "slow": an op of the interval took at least `over_us` (the operator's
  threshold, --escalate-over).

An OSD that fired is quiet for `quiet_s` (--escalate-quiet): one escalation pays for the
detail of a slowdown, not one per refresh of it. A tail that gets worse
again meanwhile is news, not the same slowdown: a p99 over `factor` x
the p99 it last fired on fires through the quiet (a blip a little over
the baseline must not hide the slowdown that follows it), once the
escalation it last asked for is over (ESCALATE_S: while it lasts the
full tier is attached anyway, and a queue filling up is one slowdown,
however fast its p99 climbs)."""
import math

from ..engine.duty import ESCALATE_S
from .config import DEFAULT_ESCALATE_QUIET_S
from ..model.hist import Hist

MIN_OPS = 20            # an interval's p99 over fewer is one op's latency
WARMUP = 5              # intervals before a baseline is trusted
WEIGHT = 0.1            # a calm interval's weight in the baseline
QUIET_S = DEFAULT_ESCALATE_QUIET_S    # after an OSD fired, quiet this long
STAGES = ("op_latency", "op_total")
REASONS = ("p99", "slow")      # why look() fires


def tail_hist(hists):
    """The interval's op latency (model/interval.py's hists: every op
    class of op_latency merged, else of op_total) -> (stage, Hist), or
    (None, None) when the interval has neither."""
    for stage in STAGES:
        got = [h for k, h in hists.items()
               if k == stage or k.startswith(stage + ".")]
        if got:
            h = Hist()
            for g in got:
                h.merge(g)
            return stage, h
    return None, None


class TailWatch:
    """`factor`: fire when p99 is over this many times the baseline (0:
    never); `over_us`: fire when an op took at least this long (None:
    no threshold); `quiet_s`: after an OSD fired, it does not fire again
    for this long (but for a worse tail)."""

    def __init__(self, factor, over_us=None, quiet_s=QUIET_S):
        self.factor, self.over_us, self.quiet_s = factor, over_us, quiet_s
        self.base = {}          # OSD -> [mean log p99 (us), intervals]
        self.quiet = {}         # OSD -> time it may fire again
        self.fired_p99 = {}     # OSD -> the p99 it last fired on (us)
        self.fired_at = {}      # OSD -> when it last fired

    def look(self, name, hists, now):
        """OSD `name`'s interval (its hists) at `now` (seconds) -> None,
        or (reason, words): "p99" or "slow", and what was seen."""
        stage, h = tail_hist(hists)
        if h is None or not h.count:
            return None
        fired = None
        if self.over_us is not None and h.max_us() >= self.over_us:
            fired = ("slow", "an op's %s %s, over the threshold %s" % (
                stage, _ms(h.max_us()), _ms(self.over_us)))
        base = self.base.get(name)
        p99 = h.percentile_us(0.99) if h.count >= MIN_OPS else None
        if p99 is not None and p99 > 0:
            if fired is None and self.factor and base and \
                    base[1] >= WARMUP and \
                    p99 > self.factor * math.exp(base[0]):
                fired = ("p99", "%s p99 %s, %.1f x its baseline %s" % (
                    stage, _ms(p99), p99 / math.exp(base[0]),
                    _ms(math.exp(base[0]))))
            w = WEIGHT / 4 if fired else WEIGHT
            if base is None:
                self.base[name] = [math.log(p99), 1]
            else:
                # the first intervals weigh as much as a plain mean
                w = max(w, 1.0 / (base[1] + 1))
                base[0] += w * (math.log(p99) - base[0])
                base[1] += 1
        if fired is None:
            return None
        worse = fired[0] == "p99" and self.factor and \
            p99 > self.factor * self.fired_p99.get(name, math.inf) and \
            now >= self.fired_at.get(name, 0.0) + ESCALATE_S
        if now < self.quiet.get(name, 0.0) and not worse:
            return None
        self.quiet[name] = now + self.quiet_s
        self.fired_at[name] = now
        if fired[0] == "p99":
            self.fired_p99[name] = p99
        return fired

    def forget(self, name):
        """An OSD that is gone (or a new process of it): no baseline."""
        self.base.pop(name, None)
        self.quiet.pop(name, None)
        self.fired_p99.pop(name, None)
        self.fired_at.pop(name, None)


def _ms(us):
    return "%.1f ms" % (us / 1000.0) if us >= 1000 else "%.0f us" % us
