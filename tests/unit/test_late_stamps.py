"""A record the recorder had to write late (stamped before the one it wrote
last on its CPU: written with that one's stamp, counted as reordered) does
not move its op: OpRec.line_up puts the enqueue, dequeue and completion
where their own measures say they are."""
from cephlat.capture.ops import OpRec


def _op(enq, deq, done, qwait=4000, total=30000):
    o = OpRec(0x10, enq, 7)
    o.deq = {"ts": deq, "queue_wait_ns": qwait}
    o.done = {"ts": done, "op_total_ns": total, "total_valid": True}
    o.line_up()
    return o


def test_nothing_late_moves_nothing():
    o = _op(1000, 5000, 31000)
    assert (o.enq_ns, o.deq["ts"], o.done["ts"]) == (1000, 5000, 31000)


def test_each_late_stamp_is_put_back():
    # the enqueue written 11 us late, then the dequeue, then the
    # completion: each time the others say where it was
    for stamps in ((12000, 5000, 31000), (1000, 16000, 31000),
                   (1000, 5000, 42000), (12000, 16000, 31000),
                   (1000, 16000, 42000), (12000, 5000, 42000)):
        o = _op(*stamps)
        assert (o.enq_ns, o.deq["ts"], o.done["ts"]) == \
            (1000, 5000, 31000), stamps


def test_a_completion_without_a_valid_total_says_nothing():
    o = OpRec(0x10, 12000, 7)
    o.deq = {"ts": 16000, "queue_wait_ns": 4000}
    o.done = {"ts": 31000, "op_total_ns": 0, "total_valid": False}
    o.line_up()
    assert (o.enq_ns, o.deq["ts"], o.done["ts"]) == (12000, 16000, 31000)


def test_a_replica_ops_reply():
    o = OpRec(0x10, 12000, 7)
    o.repop = {"ts": 21000, "repop_ns": 20000}
    o.line_up()
    assert (o.enq_ns, o.repop["ts"]) == (1000, 21000)
    # no measure (repop_ns 0: its clock read came before the enqueue's)
    o = OpRec(0x10, 12000, 7)
    o.repop = {"ts": 21000, "repop_ns": 0}
    o.line_up()
    assert (o.enq_ns, o.repop["ts"]) == (12000, 21000)
