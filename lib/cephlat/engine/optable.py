"""The BPF side's op table and request-id index, read and aged out from
user space.

probes/osdstage.bpf.c keeps the ops between enqueue and completion in an
array of struct op_slot (probes/osdstage.h: the op's key, 0 = free, and
its state), each op in one of OPS_WAYS slots from a hash of its key: no
hash-map insert or delete on the probe path. The map is BPF_F_MMAPABLE;
here it is mapped once and read as a numpy array, so counting the ops in
flight or finding stale ones is one vector operation, not a system call
per entry."""
import mmap

import numpy as np


def table_size(max_ops):
    """The table's slots for --max-ops: the next power of two."""
    n = 1
    while n < max_ops:
        n <<= 1
    return n


class _Mapped:
    """An mmapable BPF array of `struct_name` as rows of 64-bit words."""

    def __init__(self, m, abi, struct_name):
        st = abi.struct(struct_name)
        self.words = (st.size + 7) // 8
        size = m.max_entries * self.words * 8
        size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        self._mm = mmap.mmap(m.fd, size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.arr = np.frombuffer(self._mm, dtype=np.uint64,
                                 count=m.max_entries * self.words).reshape(
                                     m.max_entries, self.words)

    def close(self):
        self.arr = None
        try:
            self._mm.close()
        except BufferError:
            pass


class ReqIndex(_Mapped):
    """reqidx: struct req_slot rows (request id, op key; 0 = free)."""

    def __init__(self, m, abi):
        super().__init__(m, abi, "req_slot")
        self._key = abi.struct("req_slot").offset("key") // 8

    def drop_unless(self, live_keys):
        """Free the entries whose op is not in the op table (live_keys():
        its keys): their op completed or was aged out. The index is read
        first: an op is in the table before it is indexed."""
        k = self.arr[:, self._key].copy()
        gone = np.nonzero((k != 0) & ~np.isin(k, live_keys()))[0]
        # only entries not reused meanwhile
        gone = gone[self.arr[gone, self._key] == k[gone]]
        self.arr[gone, self._key] = 0
        return int(gone.size)


class OpTable(_Mapped):
    def __init__(self, m, abi):
        super().__init__(m, abi, "op_slot")
        slot = abi.struct("op_slot")
        state = abi.struct("op_state")
        base = slot.offset("st") // 8
        self._enq = base + state.offset("enq_ns") // 8
        self._deq = base + state.offset("deq_ns") // 8
        self.shift = abi.const("TARGET_SHIFT")

    def keys(self):
        """The keys of the ops in flight (a copy)."""
        k = self.arr[:, 0]
        return k[k != 0].copy()

    def in_flight(self, slot=None):
        k = self.keys()
        if slot is None:
            return int(k.size)
        return int(np.count_nonzero((k >> np.uint64(self.shift)) == slot))

    def in_flight_by_slot(self, nslots):
        """[ops in flight of target slot 0, 1, ...]: one pass over the
        table (a pass reads every slot's key: milliseconds for 64k)."""
        k = self.keys() >> np.uint64(self.shift)
        return [int(x) for x in np.bincount(k.astype(np.int64),
                                            minlength=nslots)[:nslots]]

    def age_out(self, now_ns, limit_ns):
        """Free the slots of ops idle for more than limit_ns (never
        completed). -> {target slot: ops freed}"""
        k = self.arr[:, 0]
        last = np.maximum(self.arr[:, self._enq], self.arr[:, self._deq])
        stale = (k != 0) & (last < np.uint64(max(0, now_ns - limit_ns)))
        out = {}
        for idx in np.nonzero(stale)[0]:
            key = int(self.arr[idx, 0])
            if not key:
                continue
            self.arr[idx, 0] = 0     # the BPF side may race: it is only lost
            s = key >> self.shift
            out[s] = out.get(s, 0) + 1
        return out

