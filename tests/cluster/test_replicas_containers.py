"""The replicated-write tests of the Pacific 3-OSD lab (test_replicas.py)
on Reef's and Tentacle's (18.2.7 and 20.2.4, CET builds in podman
containers, three OSDs each): they check that release's probe-table
offsets for request ids, replicas' replies, own commits and replica ops
against its own counters and OpTracker."""
import pytest

# the Pacific tests, run here on the container labs' `lab3`
from test_replicas import (runs,  # noqa: F401
                           test_do_op_counts_per_osd_within_3_percent,
                           test_every_osd_reported_with_replica_stages,
                           test_one_write_followed_over_its_three_osds,
                           test_replicated_writes_wait_for_both_peers,
                           test_repop_counts_match_subop_w,
                           test_request_ids_and_times_agree_with_optracker)


@pytest.fixture(scope="module", params=["reef", "tentacle"])
def lab3(request):
    return request.getfixturevalue("lab3_" + request.param)
