"""The exporter's bound (--max-overhead) in words: when its own CPU, or
the lean tier always attached, leaves the duty cycle (engine/duty.py) too
little of the bound for it to hold. exporter/service.py says each note
once."""
from ..engine import duty

OWN_AFTER_S = 30.0      # the exporter's own share is judged after this


def own_share_note(own_cpu_s, elapsed_s, bound_pct, refresh_s):
    """One line when the exporter's own CPU (reading the maps every
    refresh, serving /metrics), as a share of the host's, leaves the
    bound unheld: over the bound by itself, or over what the duty cycle
    keeps off the probes' budget for it (duty.OTHER_SHARE of the bound
    less its margin), where the probes keep the rest and the two together
    pass the bound. None otherwise (no bound, too early to tell, or
    under it)."""
    if not bound_pct or elapsed_s < OWN_AFTER_S:
        return None
    pct = 100.0 * own_cpu_s / elapsed_s / duty.ncpus()
    if pct > bound_pct:
        return ("the exporter's own CPU is %.2f %% of the host's at "
                "--refresh %g, over the %g %% bound by itself: the probes "
                "are attached as little as they can be and the bound does "
                "not hold; a longer --refresh costs less" % (
                    pct, refresh_s, bound_pct))
    keep = duty.OTHER_SHARE * duty.MARGIN * bound_pct
    if pct > keep:
        return ("the exporter's own CPU is %.2f %% of the host's at "
                "--refresh %g, more than the %.2f %% the %g %% bound sets "
                "aside for it: the probes keep their least share and the "
                "bound may not hold; a longer --refresh costs less" % (
                    pct, refresh_s, keep, bound_pct))
    return None


def whole_share_note(probes_pct, own_pct, elapsed_s, bound_pct):
    """One line when the probes' estimated cost and the exporter's own
    CPU, both since the start (the figures of its overhead and self-CPU
    metrics), together pass the bound, whatever the cause (such as its
    own share growing with the load after the duty cycle had spent what
    the bound sets aside for the probes). None otherwise."""
    if not bound_pct or elapsed_s < OWN_AFTER_S or \
            probes_pct + own_pct <= bound_pct:
        return None
    return ("the probes (an estimated %.2f %%) and the exporter itself "
            "(%.2f %%) took %.2f %% of the host's CPU since the start, over "
            "the %g %% bound: the duty cycle keeps the full tier to its "
            "least share from here; a longer --refresh costs less" % (
                probes_pct, own_pct, probes_pct + own_pct, bound_pct))


def lean_share_note(lean_pct, own_pct, elapsed_s, bound_pct):
    """One line when the lean tier, always attached, with the exporter's
    own CPU takes more of the bound than the duty cycle sets aside for
    them (duty.OTHER_SHARE of it less its margin): the full tier keeps its
    least share and the whole passes the bound. None otherwise."""
    if not bound_pct or elapsed_s < OWN_AFTER_S:
        return None
    keep = duty.OTHER_SHARE * duty.MARGIN * bound_pct
    if lean_pct + own_pct <= keep:
        return None
    return ("the lean tier costs %.2f %% of the host's CPU at this load "
            "(the exporter itself %.2f %%), more than the %.2f %% the "
            "%g %% bound sets aside for them: it stays attached (every op "
            "counted), the full tier attaches for its least share and the "
            "bound may not hold; --tiers full bounds the whole" % (
                lean_pct, own_pct, keep, bound_pct))
