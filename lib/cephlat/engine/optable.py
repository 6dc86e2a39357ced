"""The BPF side's op table, read and aged out from user space.

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


class OpTable:
    def __init__(self, m, abi):
        slot = abi.struct("op_slot")
        state = abi.struct("op_state")
        self.words = (slot.size + 7) // 8
        size = m.max_entries * self.words * 8
        size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        self._mm = mmap.mmap(m.fd, size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.arr = np.frombuffer(self._mm, dtype=np.uint64,
                                 count=m.max_entries * self.words).reshape(
                                     m.max_entries, self.words)
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

    def close(self):
        self.arr = None
        try:
            self._mm.close()
        except BufferError:
            pass
