"""Ops a capture holds only part of say so: OpRec.partial and
the op lists' first line."""
from cephlat.capture.ops import OpRec
from cephlat.render import text


def test_whole_op_is_not_partial():
    o = OpRec(0x10, 100, 7)
    o.deq = {"ts": 150, "queue_wait_ns": 50}
    o.done = {"ts": 300}
    assert o.partial() is None


def test_enqueued_before_the_capture():
    # the reader makes the op from its dequeue when no enqueue was seen
    o = OpRec(0x10, 100, 7, enq_seen=False)
    o.deq = {"ts": 150, "queue_wait_ns": 50}
    assert o.partial() == "enqueued before the capture began"


def test_completed_without_its_dequeue():
    o = OpRec(0x10, 100, 7)
    o.done = {"ts": 300}
    assert o.partial() == "completed, but its dequeue is not in the capture"
    # in flight at the capture's end (dequeued, not completed): not partial
    o = OpRec(0x10, 100, 7)
    o.deq = {"ts": 150, "queue_wait_ns": 50}
    assert o.partial() is None


def test_op_list_says_partial():
    row = {"op": "0x10", "class": "write", "total_us": 12.5,
           "partial": "enqueued before the capture began"}
    assert text._op_title(row).endswith(
        "queue_wait ? us (partial: enqueued before the capture began)")
    del row["partial"]
    assert "partial" not in text._op_title(row)
