"""cephlat - osdstage's Python package: latency tracing for Ceph OSDs with
eBPF (libbpf CO-RE).

The package behind tools/*.py. Modules:
  errors     - UserError: one-line, non-zero-exit failures
  bpf        - ctypes binding to libbpf.so.1 (open/load/attach/read maps)
  elfsym     - find C++ functions in an ELF by demangled name
  hist       - the histogram layout shared with probes/osdstage.h, percentiles
  target     - pid / ceph-osd checks, release detection
  adminsock  - Ceph's admin socket (perf dump) without the ceph CLI
  probetable - stages and the per-release table of OSD functions
  spec       - probe specs: the same for any producer/consumer program
  stagetrace - the engine: resolve, load, attach, read the kernel's aggregates
  report     - kernel stages per role, queue-wait attribution, verdict
  duty       - cost estimate and duty cycles (--max-overhead)
  osdstage   - the osdstage tool
"""
