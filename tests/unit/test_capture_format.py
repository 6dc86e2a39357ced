"""The capture's event classes are the BPF object's event structs, field
for field (the recorder copies the bytes unchanged), with the ids of
enum ev_id; and CTF enums round-trip through our reader."""
import os

from elftools.elf.elffile import ELFFile

from cephlat import abi
from cephlat.capture import ctf
from cephlat.capture import format as capture
from cephlat.model.vocab import Vocab
from conftest import BUILD, header_enum, need

OBJ = os.path.join(BUILD, "osdstage.bpf.o")
SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "x64": 8, "s32": 4, "s64": 8}


def _dwarf(path, prefix=b"ev_"):
    """{struct name: (size, [(member, offset)])} of the structs named
    prefix*"""
    structs = {}
    with open(path, "rb") as f:
        info = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
        for cu in info.iter_CUs():
            for die in cu.iter_DIEs():
                name = die.attributes.get("DW_AT_name")
                if die.tag == "DW_TAG_structure_type" and name and \
                        name.value.startswith(prefix):
                    structs[name.value.decode()] = (
                        die.attributes["DW_AT_byte_size"].value,
                        [(c.attributes["DW_AT_name"].value.decode(),
                          c.attributes["DW_AT_data_member_location"].value)
                         for c in die.iter_children()
                         if c.tag == "DW_TAG_member"])
    return structs


def test_event_classes_are_the_bpf_structs():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    structs = _dwarf(OBJ)
    a = abi.load("osdstage", BUILD)
    enums = a.enum("ev_id")
    hdr_size, hdr = structs["ev_hdr"]
    context = capture.event_context(a)
    # CTF: u32 id, u64 timestamp (event header), then the event context
    assert hdr == [("id", 0), ("ts", 4)] + [
        (n, 12 + 4 * i) for i, (n, _) in enumerate(context)]
    classes = capture.event_classes(a, Vocab(a.enums), ["other", "worker"])
    n_bpf = len(capture.bpf_event_names(a))
    assert enums["EV__BPF"] == n_bpf
    for i, c in enumerate(classes[:n_bpf]):
        short = c.name.split(":", 1)[1]
        assert enums["EV_" + short.upper()] == i, c.name
        size, members = structs["ev_" + short]
        want, off = [("h", 0)], hdr_size
        for name, ftype, _ in c.fields:
            want.append((name, off))
            off += SIZES[ftype]
        assert members == want, c.name
        assert size == off, c.name
    # enum fields carry their labels; addresses are shown in hex
    by = {c.name.split(":", 1)[1]: {f[0]: f for f in c.fields}
          for c in classes}
    assert by["op_dequeue"]["wake"][2] == ["none", "enqueuer", "other",
                                           "timeout"]
    assert by["op_done"]["op_class"][2] == ["read", "write", "other"]
    assert by["switch_out"]["state"][2] == ["run", "sleep", "runq", "dead"]
    assert by["stage"]["stage"][2][:7] == [
        "queue_wait", "dequeue_op", "do_op", "get_object_context",
        "bluestore_read", "bluestore_submit", "op_total"]
    assert by["op_dequeue"]["shard"][1] == by["op_enqueue"]["op"][1] == "x64"
    assert by["waking"]["role"][2] == ["other", "worker"]


def test_enums_and_context_round_trip(tmp_path):
    classes = [ctf.EventClass("x:ev", [("n", "u64"),
                                       ("kind", "u8", ["run", "sleep"])])]
    with ctf.Writer(str(tmp_path / "t"), classes, packet_size=4096,
                    event_context=[("cpu", "u32"), ("interval", "u32")],
                    stream="stream_meta", whole_packets=False) as w:
        w.write("x:ev", 10, 7, 1, ctx=(1, 3))
    meta = (tmp_path / "t" / "metadata").read_text()
    assert 'enum : uint8_t { "run" = 0, "sleep" = 1 } kind;' in meta
    tr = ctf.Trace(str(tmp_path / "t"))
    assert list(tr.events()) == [("x:ev", 10, {"cpu": 1, "interval": 3,
                                               "n": 7, "kind": 1})]
    # a flushed packet is cut to its content
    size = os.path.getsize(tmp_path / "t" / "stream_meta")
    assert size < 4096 and size % 8 == 0


def test_ring_bytes_is_a_power_of_two_pages():
    for mb, want in ((16, 16 << 20), (1, 1 << 20), (0.001, 4096),
                     (3, 4 << 20)):
        assert capture.ring_bytes(mb) == want


RBD_OBJ = os.path.join(BUILD, "rbdrecord.bpf.o")


def test_rbdrecord_records_match_the_decoder():
    """lib/cephlat/rbdtrace.py unpacks probes/rbdrecord.h's records."""
    need(os.path.exists(RBD_OBJ), "BPF objects not built (run: make)")
    from cephlat.rbd import trace as rbdtrace
    structs = _dwarf(RBD_OBJ, prefix=b"rbd_")
    hdr = structs["rbd_hdr"][0]
    assert hdr == rbdtrace.HDR.size
    for name, st in (("rbd_open_rec", rbdtrace.OPEN),
                     ("rbd_close_rec", rbdtrace.CLOSE),
                     ("rbd_aio_rec", rbdtrace.AIO),
                     ("rbd_complete_rec", rbdtrace.COMPLETE)):
        assert structs[name][0] == hdr + st.size, name
    assert structs["rbd_image_info"][0] == (rbdtrace.NAME_LEN +
                                            rbdtrace.SNAP_LEN +
                                            rbdtrace.POOL_LEN + 1)
    ev = header_enum("rbd_ev", "rbdrecord.h")
    assert [ev[k] for k in ("RBD_OPEN_IMAGE", "RBD_CLOSE_IMAGE_ENTER",
                            "RBD_CLOSE_IMAGE_EXIT", "RBD_AIO_ENTER",
                            "RBD_AIO_EXIT", "RBD_AIO_COMPLETE")] == [
        rbdtrace.EV_OPEN, rbdtrace.EV_CLOSE_ENTER, rbdtrace.EV_CLOSE_EXIT,
        rbdtrace.EV_AIO_ENTER, rbdtrace.EV_AIO_EXIT, rbdtrace.EV_COMPLETE]
    ops = header_enum("rbd_op", "rbdrecord.h")
    assert [k[len("RBD_OP_"):].lower() for k, v in sorted(
        ops.items(), key=lambda kv: kv[1]) if k != "RBD_OP__COUNT"] == \
        rbdtrace.OPS


def test_librbd_event_names_are_the_tracepoints():
    from cephlat.rbd import trace as rbdtrace
    names = {c.name for c in rbdtrace.event_classes()}
    assert set(rbdtrace.ENTER.values()) | set(rbdtrace.EXIT.values()) <= \
        names
    # the fields rbd-replay-prep reads, by name
    by = {c.name: c.names for c in rbdtrace.event_classes()}
    assert {"name", "snap_name", "read_only", "imagectx", "offset", "length",
            "completion"} <= set(by["librbd:aio_read_enter"])
    assert {"off", "len", "completion"} <= set(by["librbd:aio_write_enter"])
    assert by["librbd:aio_complete_enter"] == ("completion", "rval")
