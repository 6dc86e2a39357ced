"""rbdrecord and librbd's cache, without root: where the recorder finds
the cache (its symbols by build id, all or nothing), the client's
configured settings, and the cache records decoded into their events."""
import os
import re
import shutil
import struct

from conftest import BUILD, need

PID, TID, PTHREAD = 4242, 4243, 0x7f0012345600
IMAGE, COMP, PC, CACHE = 0x55aa00, 0x66bb00, 0x77cc00, 0x88dd00


def _abi():
    need(os.path.exists(os.path.join(BUILD, "rbdrecord.abi.json")),
         "BPF objects not built (run: make)")
    from cephlat import abi
    return abi.load("rbdrecord", BUILD)


def test_cache_offsets_and_programs_are_one_table():
    """Every release with offsets has every offset, each with its DWARF
    expression or its stack slot; every state the reports name."""
    from cephlat.ceph import librbd_cache as lc
    for off in lc.OFFSETS.values():
        assert set(off) == set(lc.DWARF) | set(lc.STACK)
    assert set(lc.POLICY) == set(lc.STATES)
    assert set(lc.ACKED_EARLY) < set(lc.STATES)
    for q, params in list(lc.FUNCS.values()) + list(lc.OPTIONAL.values()):
        re.compile(params)
        assert q.startswith("librbd::cache::")


def test_the_cache_is_not_traced_without_its_symbols(tmp_path):
    """A librbd without librbd1-dbg's symbol table: no site, one line
    naming the package; its globals all zero but cache_on."""
    from cephlat.rbd.ebpf import CacheSite
    fake = tmp_path / "librbd.so.1"
    shutil.copy("/bin/true", fake)
    site = CacheSite({"librbd": str(fake)}, version="16.2.15")
    assert site.sites == [] and "librbd1-dbg" in site.why
    assert site.rodata() == {"cache_on": 0}
    site = CacheSite({"librbd": str(fake)}, version="15.2.17")
    assert "no checked offsets" in site.why and "\n" not in site.why


def test_the_host_librbd_cache_is_found_when_its_debug_file_is():
    from cephlat.ceph import librbd_cache as lc
    from cephlat.engine.elfsym import ElfSymbols
    from cephlat.rbd.ebpf import CacheSite
    from cephlat.rbd.record import find_libraries
    libs = find_libraries()
    need("librbd" in libs, "librbd not installed")
    with ElfSymbols(libs["librbd"]) as elf:
        need(elf.debug_file(), "librbd1-dbg not installed")
    site = CacheSite(libs)
    assert site.why is None, site.why
    assert {r for r, _, _, _ in site.sites} >= set(lc.FUNCS)
    assert site.rodata()["cache_on"] == 1


def test_configured_settings_from_args_and_conf():
    from cephlat.rbd import cacheconf
    assert cacheconf.from_args(
        "--rbd_cache_policy=writeback --rbd-cache-max-dirty 65536 "
        "--rbd_cache --debug_rbd 20") == {
        "rbd_cache_policy": "writeback", "rbd_cache_max_dirty": "65536",
        "rbd_cache": "true"}
    conf = ("[global]\nrbd cache = false\nrbd_cache_policy = writearound\n"
            "[client]\nrbd cache = true  # on\n[client.vm]\n"
            "rbd_cache_policy = writethrough\n[osd]\nrbd_cache_size = 1\n")
    assert cacheconf.from_conf(conf, "client.vm") == {
        "rbd_cache": "true", "rbd_cache_policy": "writethrough"}
    assert cacheconf.from_conf(conf) == {
        "rbd_cache": "true", "rbd_cache_policy": "writearound"}
    assert cacheconf._client_name("--id vm") == "client.vm"
    env = cacheconf.env_fields({"rbd_cache": {"value": "true",
                                              "source": "CEPH_ARGS"}})
    assert cacheconf.from_env(dict(env, pid=1)) == {
        "rbd_cache": "true (CEPH_ARGS)"}


def cache_records(a, recs):
    """Raw ring-buffer bytes of rbd_cache_rec records: (kind, ts, values)."""
    from cephlat.rbd.records import Layout
    ev = a.enum("rbd_ev")
    out = []
    for kind, ts, values in recs:
        raw = Layout(a, "rbd_cache_rec").pack(
            **{"h.ev": ev[kind], "h.tid": TID, "h.ts": ts,
               "h.pthread_id": PTHREAD}, **values)
        out.append(struct.pack("<II", len(raw), 0) + raw +
                   bytes(-len(raw) % 8))
    return b"".join(out)


def test_cache_records_decode_to_their_events():
    from cephlat.rbd.records import Decoder
    a = _abi()
    st = a.enum("rbd_cache_state")
    data = cache_records(a, [
        ("RBD_CACHE_WRITE", 100, dict(
            completion=COMP, aio_comp=PC, imagectx=IMAGE, cache=CACHE,
            object_no=3, off=4096, len=4096, tid=7, in_flight=8192,
            max_dirty=1 << 24, init_max_dirty=1 << 24,
            state=st["RBD_CACHE_QUEUED"])),
        ("RBD_CACHE_DONE", 900, dict(cache=CACHE, r=-5, tid=7, object_no=3,
                                     off=4096, len=4096, in_flight=4096))])
    evs = Decoder(PID, a).decode(data)
    ctx = (PTHREAD, TID, PID)
    assert evs == [
        (100, "rbdrecord:cache_write", ctx, (
            COMP, PC, IMAGE, CACHE, 3, 4096, 4096, 7, 8192, 1 << 24,
            1 << 24, 0, st["RBD_CACHE_QUEUED"], "queued")),
        (900, "rbdrecord:cache_write_done", ctx, (
            CACHE, -5, 7, 3, 4096, 4096, 4096))]
    from cephlat.rbd import events
    names = {c.name: c.names for c in events.event_classes()}
    assert len(names["rbdrecord:cache_write"]) == len(evs[0][3])
    assert len(names["rbdrecord:cache_write_done"]) == len(evs[1][3])


def test_flush_records_decode_to_librbd_flush_events():
    from cephlat.rbd.records import Decoder, Layout
    a = _abi()
    ev = a.enum("rbd_ev")
    raw = b""
    for kind, ts, vals in (("RBD_FLUSH_ENTER", 5, {"imagectx": IMAGE}),
                           ("RBD_FLUSH_EXIT", 9, {"retval": 0})):
        r = Layout(a, "rbd_close_rec").pack(
            **{"h.ev": ev[kind], "h.tid": TID, "h.ts": ts}, **vals)
        raw += struct.pack("<II", len(r), 0) + r + bytes(-len(r) % 8)
    evs = Decoder(PID, a).decode(raw)
    assert [(e[1], e[3]) for e in evs] == [
        ("librbd:flush_enter", (IMAGE, "image-%x" % IMAGE, "", 0)),
        ("librbd:flush_exit", (0,))]
