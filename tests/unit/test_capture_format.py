"""The capture's event classes are the BPF object's event structs, field
for field (the recorder copies the bytes unchanged), with the ids of
enum ev_id; and CTF enums round-trip through our reader."""
import os

from elftools.elf.elffile import ELFFile

from cephlat import capture, ctf
from conftest import BUILD, header_enum, need

OBJ = os.path.join(BUILD, "osdstage.bpf.o")
SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "x64": 8, "s32": 4, "s64": 8}


def _dwarf(path):
    """{struct name: (size, [(member, offset)])}"""
    structs = {}
    with open(path, "rb") as f:
        info = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
        for cu in info.iter_CUs():
            for die in cu.iter_DIEs():
                name = die.attributes.get("DW_AT_name")
                if die.tag == "DW_TAG_structure_type" and name and \
                        name.value.startswith(b"ev_"):
                    structs[name.value.decode()] = (
                        die.attributes["DW_AT_byte_size"].value,
                        [(c.attributes["DW_AT_name"].value.decode(),
                          c.attributes["DW_AT_data_member_location"].value)
                         for c in die.iter_children()
                         if c.tag == "DW_TAG_member"])
    return structs


def test_event_classes_are_the_bpf_structs():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    structs, enums = _dwarf(OBJ), header_enum("ev_id")
    hdr_size, hdr = structs["ev_hdr"]
    # CTF: u32 id, u64 timestamp (event header), then the event context
    assert hdr == [("id", 0), ("ts", 4)] + [
        (n, 12 + 4 * i) for i, (n, _) in enumerate(capture.CONTEXT)]
    classes = capture.event_classes(["other", "worker"])
    assert enums["EV__BPF"] == capture.N_BPF_EVENTS
    for i, c in enumerate(classes[:capture.N_BPF_EVENTS]):
        short = c.name.split(":", 1)[1]
        assert enums["EV_" + short.upper()] == i, c.name
        size, members = structs["ev_" + short]
        want, off = [("h", 0)], hdr_size
        for name, ftype, _ in c.fields:
            want.append((name, off))
            off += SIZES[ftype]
        assert members == want, c.name
        assert size == off, c.name


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
