# Latency tracing for Ceph OSDs - the one entry point.
#
#   make demo       setup + build + lab + workload + osdstage report
#   make test       setup + build + every test tier
#   make setup      install what is missing (Debian packages), mount tracefs
#   make / build    compile probes/*.bpf.c (CO-RE, clang -target bpf)
#   make lab        start the single-node Ceph lab (LAB_OSD_OPTS='k=v ...'); OSDS=3:
#                   three OSDs, each on its own loop device, pool rbd size 3 (OSDS=1|2|3;
#                   without OSDS=: the running lab's count, else 1; another count rebuilds)
#                   HOSTS=3: three hosts, each a network namespace with one OSD
#                   (OSDS_PER_HOST=2 for two), CRUSH failure domain host, the client in
#                   a namespace of its own; LAB_NET_DELAY=0.5ms delays each host's link
#                   (vagrant/labnet.sh; `vagrant/lab.sh net-delay HOST DELAY` changes one);
#                   with CEPH=reef|tentacle too (the daemons in the release's container)
#                   LAB_POOL=ec:2+1: image img1's data in an erasure-coded pool (rbd-ec)
#   make -s lab-env print export lines for CEPH_CONF, OSD_PID (osd.0), OSD_PIDS and
#                   OSD_ASOKS (every OSD, comma-separated), LAB_POOL; with HOSTS:
#                   OSD_NETNS, CLIENT_NETNS
#   make lab-down   stop the lab's daemons, detach its loop devices
#   make workload   rados bench writes then random reads (SECS=, THREADS=)
#                   lab-env, lab-down and workload act on the running lab, whatever its OSDS
#   CEPH=reef|tentacle  with setup, lab, lab-env, lab-down, workload, bench: the
#                   lab in a container with Debian trixie's Ceph 18.2 / sid's 20.2
#                   (vagrant/container.sh); default CEPH=pacific, the host's 16.2
#   make bench      what tracing costs (BENCHMARKS.md; every part, ~2 h); BENCH=osds:
#                   only one OSD traced vs three on the 3-OSD lab (~6 min), BENCH=main: the
#                   tracing modes on the 1-OSD lab (~31 min), BENCH=reader: the reader
#                   on a >= 10 M-event capture of the controlled program and on its waits'
#                   stacks, and the recorder alone (~6 min, no lab needed), BENCH=floor: what one uprobe hit costs
#                   here by the instruction probed (~1 min, no lab needed), BENCH=client:
#                   what rbdrecord costs the client (~4 min), BENCH=merged: the merged
#                   reader on a BENCH_MERGED_MIN-minute 3-host capture set, each read
#                   BENCH_MERGED_RUNS times (~30 min), BENCH=toggle: the lean, userspace
#                   and default modes attached and detached every 2 s under one fio run
#                   on the 1-OSD lab, Ceph's OpTracker off and on in turn with them
#                   (~9 min)
#   make install    the commands osdstage, rbdrecord, osdstage-exporter, their man
#                   pages and what they load at run time (PREFIX=/usr/local, DESTDIR;
#                   docs/install.md); make uninstall removes them
#   make deb        build/osdstage_VERSION_ARCH.deb of the same (PREFIX=/usr)
#   make clean      remove build/

# One interpreter everywhere: Debian's, which sees Debian's python3-* packages
# (pyelftools, pytest). The pyenv python3 on PATH does not.
PYTHON := /usr/bin/python3
export PYTHON

BUILD := build
CLANG ?= clang
BPFTOOL ?= bpftool
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
BPF_CFLAGS := -target bpf -D__TARGET_ARCH_$(ARCH) -g -O2 -Wall -Werror \
	-I$(BUILD) -Iprobes
BPF_SRCS := $(wildcard probes/*.bpf.c)
BPF_OBJS := $(patsubst probes/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
# what each object says about itself (enums, layouts, programs), for Python
BPF_ABIS := $(BPF_OBJS:.bpf.o=.abi.json)

LAB := vagrant/lab.sh
CONTAINER_LAB := vagrant/container.sh
# Which lab the lab targets act on: the host's (pacific) or a container's (reef,
# tentacle). lab.sh hands CEPH=reef|tentacle over to container.sh.
CEPH ?= pacific
CONTAINER_RELEASES := reef tentacle
LABCTL := CEPH=$(CEPH) $(LAB)
# OSDS=1|2|3: the lab's OSD count for `make lab` (lab.sh's LAB_OSDS); checked here
# so that a bad value is one line on stderr (lab.sh checks LAB_OSDS the same way).
OSDS ?=
LAB_OSDS_ENV = $(if $(strip $(OSDS)),$(if $(filter-out 1 2 3,$(OSDS))$(filter-out 1,$(words $(OSDS))),$(error OSDS='$(OSDS)': the single-node lab runs 1 to 3 OSDs),LAB_OSDS=$(strip $(OSDS))))
# HOSTS=2|3, OSDS_PER_HOST=1|2: the multi-host lab (lab.sh's LAB_HOSTS,
# LAB_OSDS_PER_HOST; lab.sh checks them); LAB_NET_DELAY, LAB_NET_JITTER pass through
HOSTS ?=
OSDS_PER_HOST ?=
LAB_HOSTS_ENV = $(if $(strip $(HOSTS)),LAB_HOSTS=$(strip $(HOSTS))) \
	$(if $(strip $(OSDS_PER_HOST)),LAB_OSDS_PER_HOST=$(strip $(OSDS_PER_HOST)))
SECS ?= 10
THREADS ?= 16
DEMO_SECS ?= 10
export LAB_OSD_OPTS SECS THREADS LAB_NET_DELAY LAB_NET_JITTER

# Debian packages for building, testing and the lab's tooling. The Ceph
# daemons themselves are installed by $(LAB) install (shared with vagrant/).
PKGS := clang llvm libbpf1 libbpf-dev bpftool bpftrace lttng-tools \
	babeltrace2 python3-bt2 fio g++ binutils gdb ruby util-linux procps iproute2 \
	python3-pytest python3-pyelftools python3-capstone python3-numpy ceph-osd-dbg librados2-dbg librbd1-dbg chromium \
	prometheus python3-prometheus-client python3-yaml python3-jsonschema systemd

.PHONY: all build setup setup-containers lab lab-env lab-down workload demo test \
	test-unit test-bpf test-cluster bench clean install uninstall deb

# the shared objects the tools load at run time (ctypes)
NATIVE_LIBS := $(BUILD)/libcephlat_calib.so $(BUILD)/libcephlat_calib_cet.so \
	$(BUILD)/libcephlat_rec.so

all build: $(BPF_OBJS) $(BPF_ABIS) $(NATIVE_LIBS)

$(BUILD)/vmlinux.h:
	@mkdir -p $(BUILD)
	@test -r /sys/kernel/btf/vmlinux || { echo "no kernel BTF at /sys/kernel/btf/vmlinux" >&2; exit 1; }
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	@mv $@.tmp $@

$(BUILD)/%.bpf.o: probes/%.bpf.c $(wildcard probes/*.h probes/*/*.h) $(BUILD)/vmlinux.h
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.abi.json: $(BUILD)/%.bpf.o probes/abigen.py
	$(PYTHON) probes/abigen.py $< > $@.tmp
	@mv $@.tmp $@

# user-space function for probe-cost calibration (see probes/calib.c), in
# both flavours of the binaries we probe: without CET and with (endbr64)
$(BUILD)/libcephlat_calib.so: probes/calib.c
	@mkdir -p $(BUILD)
	$(CC) -O0 -fno-omit-frame-pointer -fcf-protection=none -Wall -Werror \
		-shared -fPIC -o $@ $<

$(BUILD)/libcephlat_calib_cet.so: probes/calib.c
	@mkdir -p $(BUILD)
	$(CC) -O0 -fno-omit-frame-pointer -fcf-protection=full -Wall -Werror \
		-shared -fPIC -o $@ $<

# the capture recorder: ring buffer -> CTF stream files (lib/native/)
$(BUILD)/libcephlat_rec.so: lib/native/recorder.c probes/osdstage.h
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Werror -Iprobes -shared -fPIC -pthread -o $@ $< -lbpf

# Installs only what is missing, silently; a failed step is named, with apt's
# (or mmdebstrap's) own last lines and its log in /var/log/osdstage/.
setup:
	@$(LAB) install $(PKGS)
	@$(LAB) install
ifneq ($(CEPH),pacific)
	@$(CONTAINER_LAB) $(CEPH) install
endif
	@mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
	@mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug

# the container labs' tools and cached root filesystems (built when missing)
setup-containers:
	@for r in $(CONTAINER_RELEASES); do $(CONTAINER_LAB) $$r install || exit 1; done

lab:
	@$(LAB_OSDS_ENV) $(LAB_HOSTS_ENV) $(LABCTL) up

lab-env:
	@$(LABCTL) env

lab-down:
	@$(LABCTL) down

workload:
	@$(LABCTL) workload $(SECS) $(THREADS)

# The demo leaves the lab running (stop it with: make lab-down).
demo: setup build lab
	@eval "$$($(LAB) env)"; \
	echo "demo: driving 4 KiB random reads for $$(( $(DEMO_SECS) + 10 ))s and tracing ceph-osd $$OSD_PID for $(DEMO_SECS)s"; \
	rados -p rbd bench 5 write -b 4096 -t $(THREADS) --no-cleanup >/dev/null; \
	( rados -p rbd bench $$(( $(DEMO_SECS) + 10 )) rand -t $(THREADS) >/dev/null 2>&1 & ); \
	sleep 3; \
	$(PYTHON) tools/osdstage.py -p $$OSD_PID $(DEMO_SECS) 1

test: setup setup-containers build
	CI=$${CI:-} $(PYTHON) -m pytest -v --durations=0 --durations-min=5 tests/unit tests/bpf tests/cluster

test-unit: build
	$(PYTHON) -m pytest -v tests/unit

test-bpf: build
	$(PYTHON) -m pytest -v tests/bpf

test-cluster: build
	$(PYTHON) -m pytest -v tests/cluster

# 4 interleaved pairs of 8-s windows per mode and workload (bounded: 20 s,
# two duty periods): ~22 min for the main part, ~28 with the osds part;
# the spread is the OSD's own run-to-run swing, so pairs beat length
BENCH_PAIRS ?= 4
BENCH_SECS ?= 8
# BENCH=main: the tracing modes on the 1-OSD lab; BENCH=osds: one OSD traced
# vs three (switches the lab to OSDS=3); BENCH=reader: the reader on a large
# capture and on stacks, and the recorder alone; BENCH=exporter: the exporter's soak,
# BENCH_SOAK_MIN minutes on the 3-OSD lab; BENCH=floor: one uprobe hit's
# floor; BENCH=client: what rbdrecord costs the client it records;
# BENCH=merged: the merged reader's speed on a BENCH_MERGED_MIN-minute
# capture set of the 3-host lab; all: every part (bench/run.py --render-only
# writes BENCHMARKS.md again from the saved results, measuring nothing)
BENCH ?= all
BENCH_SOAK_MIN ?= 30
BENCH_MERGED_MIN ?= 10
# a read of the 10-minute set takes about 6 min: once each by default
BENCH_MERGED_RUNS ?= 1
BENCH_OSDS_PAIRS ?= 3
BENCH_OSDS_SECS ?= 8
bench: setup build lab
	CEPH=$(CEPH) $(PYTHON) bench/run.py --part $(BENCH) --pairs $(BENCH_PAIRS) --secs $(BENCH_SECS) \
	  --osds-pairs $(BENCH_OSDS_PAIRS) --osds-secs $(BENCH_OSDS_SECS) --soak-min $(BENCH_SOAK_MIN) \
	  --merged-min $(BENCH_MERGED_MIN) --merged-runs $(BENCH_MERGED_RUNS)

clean:
	rm -rf $(BUILD)

# ------------------------------------------------------------ install, package
# PREFIX/bin: the commands (python3 wrappers with the package's directory
# written in); PREFIX/lib/osdstage: the package, the BPF objects, their ABI
# files, the .so files and the bpftrace scripts in one directory, where
# lib/cephlat/abi.py looks first (beside the package); PREFIX/share/man/man8:
# the man pages (the exporter's as osdstage-exporter.8, the command's name);
# the systemd unit, not enabled. Installing runs and starts nothing.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
PKGLIBDIR := $(PREFIX)/lib/osdstage
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/osdstage
UNITDIR ?= $(PREFIX)/lib/systemd/system
# the version: VERSION, the one place it is written
VERSION := $(shell cat VERSION 2>/dev/null || echo 0~git$$(git describe --always 2>/dev/null))
# command:module of cephlat.cli (each has main(argv=None) -> exit status)
COMMANDS := osdstage:osdstage rbdrecord:rbdrecord osdstage-exporter:exporter

install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR)/probes \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	rm -rf $(DESTDIR)$(PKGLIBDIR)/cephlat
	cd lib && find cephlat -name __pycache__ -prune -o -type f ! -name '*.pyc' -print | \
		while read -r f; do install -D -m 644 "$$f" "$(DESTDIR)$(PKGLIBDIR)/$$f" || exit 1; done
	install -m 644 $(BPF_OBJS) $(BPF_ABIS) $(NATIVE_LIBS) $(DESTDIR)$(PKGLIBDIR)/
	install -m 644 probes/*.bt $(DESTDIR)$(PKGLIBDIR)/probes/
	@set -e; for c in $(COMMANDS); do \
		cmd=$${c%%:*}; mod=$${c#*:}; \
		echo "install $(DESTDIR)$(BINDIR)/$$cmd"; \
		printf '%s\n' '#!/usr/bin/python3' \
			"# $$cmd $(VERSION) (man $$cmd): the package is in $(PKGLIBDIR)" \
			'import sys' \
			'sys.path.insert(0, "$(PKGLIBDIR)")' \
			"from cephlat.cli.$$mod import main" \
			'sys.exit(main())' > $(DESTDIR)$(BINDIR)/$$cmd.tmp; \
		chmod 755 $(DESTDIR)$(BINDIR)/$$cmd.tmp; \
		mv -f $(DESTDIR)$(BINDIR)/$$cmd.tmp $(DESTDIR)$(BINDIR)/$$cmd; \
	done
	install -m 644 man/man8/osdstage.8 man/man8/rbdrecord.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 644 man/man8/osdstage_exporter.8 $(DESTDIR)$(MANDIR)/man8/osdstage-exporter.8
	ln -sf osdstage-exporter.8 $(DESTDIR)$(MANDIR)/man8/osdstage_exporter.8
	sed -e 's|^ExecStart=.*osdstage_exporter\.py|ExecStart=$(BINDIR)/osdstage-exporter|' \
		-e 's|^Documentation=.*|Documentation=man:osdstage-exporter(8) file:$(DOCDIR)/install.md|' \
		deploy/systemd/osdstage-exporter.service > $(DESTDIR)$(UNITDIR)/osdstage-exporter.service.tmp
	@grep -q '^ExecStart=$(BINDIR)/osdstage-exporter ' $(DESTDIR)$(UNITDIR)/osdstage-exporter.service.tmp || \
		{ echo "make install: deploy/systemd/osdstage-exporter.service: no ExecStart line to point at $(BINDIR)/osdstage-exporter" >&2; exit 1; }
	chmod 644 $(DESTDIR)$(UNITDIR)/osdstage-exporter.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/osdstage-exporter.service.tmp $(DESTDIR)$(UNITDIR)/osdstage-exporter.service
	install -m 644 README.md docs/install.md tools/*_example.txt $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(foreach c,$(COMMANDS),$(DESTDIR)$(BINDIR)/$(firstword $(subst :, ,$(c))))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man8/,osdstage.8 rbdrecord.8 \
		osdstage-exporter.8 osdstage_exporter.8)
	rm -f $(DESTDIR)$(UNITDIR)/osdstage-exporter.service
	rm -rf $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(DOCDIR)

# The Debian package: `make install` into a staging root (PREFIX=/usr), the
# control file from packaging/debian/, then dpkg-deb. Runs no test.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB := $(BUILD)/osdstage_$(VERSION)_$(DEB_ARCH).deb
DEB_ROOT := $(BUILD)/deb-root

deb: build
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(CURDIR)/$(DEB_ROOT)
	install -d $(DEB_ROOT)/DEBIAN
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' \
		-e "s|@SIZE@|$$(du -sk $(DEB_ROOT) | cut -f1)|" \
		packaging/debian/control > $(DEB_ROOT)/DEBIAN/control
	sed -e 's|@PKGLIBDIR@|/usr/lib/osdstage|' packaging/debian/prerm > $(DEB_ROOT)/DEBIAN/prerm
	chmod 755 $(DEB_ROOT)/DEBIAN/prerm
	cd $(DEB_ROOT) && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | \
		LC_ALL=C sort | xargs md5sum > DEBIAN/md5sums
	dpkg-deb --root-owner-group --build $(DEB_ROOT) $(DEB)
