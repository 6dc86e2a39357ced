"""cephlat - latency tracing for Ceph OSDs with eBPF (libbpf CO-RE).

The package behind tools/*.py. Modules:
  errors   - UserError: one-line, non-zero-exit failures
  bpf      - ctypes binding to libbpf.so.1 (open/load/attach/read maps)
  elfsym   - find C++ functions in an ELF by demangled name
  hist     - the histogram layout shared with probes/osdstage.h, percentiles
  target   - pid / ceph-osd checks, release detection
  osdstage - the osdstage tool
"""
