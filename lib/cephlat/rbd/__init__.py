"""rbdrecord's work: record librbd client I/O, read it back, summarize it,
turn it into fio jobs. cli/rbdrecord.py parses the command line and calls:

  record.py   eBPF recording: the target (-p PID or COMMAND, held until
              the probes are in place), the loop, the counts reported
  ebpf.py     the uprobes on librbd's C API, drained into a trace
  records.py  the BPF records, decoded with the layouts of the build
              (build/rbdrecord.abi.json, from probes/rbdrecord.h)
  events.py   the trace's events: librbd's LTTng tracepoint names, fields
  lttng.py    LTTng mode: Ceph's recipe, with its checks
  outdir.py   output directories: what --force may replace
  reader.py   traces of either mode, read with babeltrace2 (bt2)
  summary.py  --summary
  fio.py      --to-fio
  traces.py   --otlp: the client's spans of the chosen ops, from the
              trace just written, to an OTLP collector
"""

TOOL = "rbdrecord"
