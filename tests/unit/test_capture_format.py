"""The capture's event classes are the BPF object's event structs, field
for field (the recorder copies the bytes unchanged), with the ids of
enum ev_id; and CTF enums round-trip through our reader."""
import os
import re
import struct

from elftools.elf.elffile import ELFFile

from cephlat import abi
from cephlat.capture import ctf
from cephlat.capture import format as capture
from cephlat.ceph import probetable
from cephlat.engine.loadtime import ring_bytes
from cephlat.model.vocab import Vocab
from conftest import BUILD, REPO, header_enum, need

OBJ = os.path.join(BUILD, "osdstage.bpf.o")
RECORDER = os.path.join(REPO, "lib", "native", "recorder.c")
SIZES = {"u8": 1, "s8": 1, "u16": 2, "u32": 4, "u64": 8, "x64": 8, "s32": 4,
         "char64": 64,
         "s64": 8}


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


def _offsets(fmt):
    """The offsets of a little-endian struct format's fields, and its size
    last: "<IQ" -> [0, 4, 12]."""
    out, off = [], 0
    for c in fmt.lstrip("<"):
        out.append(off)
        off += struct.calcsize("<" + c)
    return out + [off]


def _recorder_defines():
    """lib/native/recorder.c's #define NAME NUMBER lines -> {NAME: int}."""
    with open(RECORDER) as f:
        return {m.group(1): int(m.group(2), 0) for m in re.finditer(
            r"^#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|[0-9]+)u?\b", f.read(),
            re.M)}


def test_the_native_recorder_writes_the_readers_packet_layout():
    """The packet header and context that lib/native/recorder.c writes
    (live captures) are the ones capture/ctf.py writes and reads: the same
    magic, sizes and context offsets (CTF's packet.header and
    packet.context in the metadata both write)."""
    d = _recorder_defines()
    assert d["CTF_MAGIC"] == ctf.MAGIC
    assert d["HDR_SIZE"] == ctf._HDR.size
    assert d["CTX_SIZE"] == ctf._CTX.size
    # put64/put32 at HDR_SIZE + k: the context's fields, in order
    with open(RECORDER) as f:
        src = f.read()
    puts = [(int(w), int(k or 0)) for w, k in re.findall(
        r"put(32|64)\(p \+ HDR_SIZE(?: \+ (\d+))?,", src)]
    ctx = _offsets(ctf._CTX.format)
    sizes = {"Q": 64, "I": 32}
    assert puts == [(sizes[c], o) for c, o in
                    zip(ctf._CTX.format.lstrip("<"), ctx)]


def test_event_classes_are_the_bpf_structs():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    structs = _dwarf(OBJ)
    a = abi.load("osdstage", BUILD)
    enums = a.enum("ev_id")
    hdr_size, hdr = structs["ev_hdr"]
    context = capture.event_context(a)
    # CTF: u32 id, u64 timestamp (event header: the reader's _EVH), then
    # the event context
    evh = _offsets(ctf._EVH.format)
    assert [o for _, o in hdr[:2]] == evh[:2] and \
        [n for n, _ in hdr[:2]] == ["id", "ts"]
    assert hdr == hdr[:2] + [
        (n, evh[2] + 4 * i) for i, (n, _) in enumerate(context)]
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
            arr = ctf.array_of(ftype)
            off += SIZES[arr[0]] * arr[1] if arr else SIZES[ftype]
        assert members == want, c.name
        assert size == off, c.name
    # enum fields carry their labels; addresses are shown in hex
    by = {c.name.split(":", 1)[1]: {f[0]: f for f in c.fields}
          for c in classes}
    assert by["op_dequeue"]["wake"][2] == ["none", "enqueuer", "other",
                                           "timeout"]
    assert by["op_done"]["op_class"][2] == ["read", "write", "other"]
    assert by["switch_out"]["state"][2] == ["run", "sleep", "runq", "dead"]
    # the stage ids are the probe table's stages, in its order (the names
    # themselves: test_probetable's contract)
    stages = list(probetable.STAGES)
    assert by["stage"]["stage"][2][:len(stages)] == stages
    assert by["op_dequeue"]["shard"][1] == by["op_enqueue"]["op"][1] == "x64"
    assert by["waking"]["role"][2] == ["other", "worker"]
    # a wait's stacks: addresses in hex, the user stack's bytes
    assert by["wait_stack"]["kstack"][1] == "x64[%d]" % a.const(
        "KSTACK_DEPTH")
    assert by["wait_stack"]["ustack"][1] == "u8[%d]" % a.const(
        "USTACK_BYTES")


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
        assert ring_bytes(mb) == want


RBD_OBJ = os.path.join(BUILD, "rbdrecord.bpf.o")
RBD_RECORDS = ("rbd_open_rec", "rbd_close_rec", "rbd_aio_rec",
               "rbd_complete_rec", "rbd_cache_rec")
RBD_NESTED = {"h": "rbd_hdr", "img": "rbd_image_info"}   # member -> struct


def _rbd_abi():
    need(os.path.exists(RBD_OBJ) and os.path.exists(
        os.path.join(BUILD, "rbdrecord.abi.json")),
        "BPF objects not built (run: make)")
    from cephlat import abi
    return abi.load("rbdrecord", BUILD)


def _dwarf_offsets(structs, name, prefix="", base=0):
    """{value name as records.Layout names it: offset} from the DWARF"""
    out = {}
    for member, off in structs[name][1]:
        if member in RBD_NESTED:
            out.update(_dwarf_offsets(structs, RBD_NESTED[member],
                                      prefix + member + ".", base + off))
        else:
            out[prefix + member] = base + off
    return out


def test_rbdrecord_records_match_the_decoder():
    """lib/cephlat/rbd/records.py unpacks probes/rbdrecord.h's records with
    the layouts of the build's ABI: each value where the object's DWARF
    puts it, the ids and ops of the header's enums."""
    from cephlat.rbd import records
    a = _rbd_abi()
    structs = _dwarf(RBD_OBJ, prefix=b"rbd_")
    hdr = records.Layout(a, "rbd_hdr")
    assert structs["rbd_hdr"][0] == hdr.size
    for name in RBD_RECORDS + ("rbd_hdr", "rbd_image_info"):
        lay = records.Layout(a, name)
        assert structs[name][0] == lay.size, name
        where = _dwarf_offsets(structs, name)
        assert sorted(lay.names) == sorted(where), name
        for value in lay.names:
            raw = lay.pack(**{value: b"\x01" if value in lay.strings
                              else 1})
            assert raw.index(1) == where[value], (name, value)
    # the names: char arrays of the header's lengths, read as bytes
    img = structs["rbd_image_info"][1]
    lengths = [b - a for (_, a), (_, b) in zip(img, img[1:])]
    name, snap, pool = records.Layout(a, "rbd_open_rec").reader(
        "img.name", "img.snap", "img.pool")(bytes(1000), 0)
    assert [len(name), len(snap), len(pool)] == lengths
    assert structs["rbd_image_info"][0] == sum(lengths) + 1
    ev = header_enum("rbd_ev", "rbdrecord.h")
    assert a.enum("rbd_ev") == ev
    # every record kind is decoded
    assert set(records.Decoder(1, a)._by_ev) == set(ev.values())
    ops = header_enum("rbd_op", "rbdrecord.h")
    assert [k[len("RBD_OP_"):].lower() for k, v in sorted(
        ops.items(), key=lambda kv: kv[1]) if k != "RBD_OP__COUNT"] == \
        records.ops(a)


def test_rbdrecord_programs_and_settings_are_the_objects():
    """Every program of probes/rbdrecord.bpf.c is attached (ebpf.PROBES
    and the Objecter's, entry or return as its section says), .rodata is
    laid out as the object has it and holds every Objecter offset, the
    "lost" slots are enum rbd_lost."""
    from cephlat.ceph import librbd_cache, objecter
    from cephlat.rbd import ebpf, events, records
    a = _rbd_abi()
    attached = {p for _, _, progs in ebpf.PROBES for p in progs}
    attached |= {p for progs in ebpf.OBJECTER_PROGRAMS.values()
                 for p in progs}
    attached |= set(ebpf.CACHE_PROGRAMS.values())
    assert attached == set(a.programs)
    assert set(ebpf.OBJECTER_PROGRAMS) == set(objecter.FUNCS)
    assert set(ebpf.CACHE_PROGRAMS) == set(librbd_cache.FUNCS) | set(
        librbd_cache.OPTIONAL)
    ro_names = {n for n, _ in a.ctypes_globals(".rodata")._fields_}
    cache_ro = set(ebpf.CacheSite({}).rodata()) | set(
        librbd_cache.OFFSETS["16.2"]) | {"oc_on"}
    for offsets in objecter.OFFSETS.values():
        assert set(offsets) | {"objecter_on", "targ_tgid"} | cache_ro == \
            ro_names
        assert set(offsets) == set(objecter.DWARF) | set(objecter.OP_MEMBERS)
    for offsets in librbd_cache.OFFSETS.values():
        assert set(offsets) == set(librbd_cache.DWARF) | set(
            librbd_cache.STACK)
    assert set(a.programs.values()) == {"uprobe", "uretprobe"}
    with open(RBD_OBJ, "rb") as f:
        elf = ELFFile(f)
        sym = elf.get_section_by_name(".symtab").get_symbol_by_name(
            "targ_tgid")[0]
        assert elf.get_section(sym["st_shndx"]).name == ".rodata"
        ro = a.ctypes_globals(".rodata")
        assert (ro.targ_tgid.offset, ro.targ_tgid.size) == (
            sym["st_value"], sym["st_size"])
    lost = header_enum("rbd_lost", "rbdrecord.h")
    assert a.enum("rbd_lost") == lost
    assert a.labels("rbd_lost")[:lost["RBD_LOST__COUNT"]] == [
        "ring", "completions", "unread", "cache_unread", "unknown_comp",
        "pcs"]
    # what the cache did: the header's states are the reports' words
    states = header_enum("rbd_cache_state", "rbdrecord.h")
    assert a.labels("rbd_cache_state")[:states["RBD_CACHE__COUNT"]] == \
        list(librbd_cache.STATES)
    # each op of enum rbd_op has its events
    assert set(events.ENTER) == set(events.EXIT) == set(records.ops(a))


def test_librbd_event_names_are_the_tracepoints():
    from cephlat.rbd import events
    names = {c.name for c in events.event_classes()}
    assert set(events.ENTER.values()) | set(events.EXIT.values()) <= names
    # the fields rbd-replay-prep reads, by name
    by = {c.name: c.names for c in events.event_classes()}
    assert {"name", "snap_name", "read_only", "imagectx", "offset", "length",
            "completion"} <= set(by["librbd:aio_read_enter"])
    assert {"off", "len", "completion"} <= set(by["librbd:aio_write_enter"])
    assert by["librbd:aio_complete_enter"] == ("completion", "rval")
