"""The deployment examples of deploy/ (no root, no cluster):

- the privileges are the same everywhere: the capability set found on the
  lab (tests/cluster/test_exporter_container.py: CAP_BPF, CAP_PERFMON,
  CAP_SYS_PTRACE) in the systemd unit, the podman command, the
  Kubernetes DaemonSet and the README; the host's PID namespace, tracefs
  read-only; never privileged, never CAP_SYS_ADMIN;
- the systemd unit: its settings, and `systemd-analyze verify`;
- the container: the Containerfile's shape, the seccomp profile is the
  engine's default with exactly bpf/perf_event_open moved from
  CAP_SYS_ADMIN to CAP_BPF/CAP_PERFMON (mkseccomp.py's output);
- the Kubernetes objects parse (python3-yaml) and have the expected shape;
- no registry's host name anywhere in deploy/.
"""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, need

DEPLOY = os.path.join(REPO, "deploy")
UNIT = os.path.join(DEPLOY, "systemd", "osdstage-exporter.service")
CONTAINERFILE = os.path.join(DEPLOY, "container", "Containerfile")
RUN_SH = os.path.join(DEPLOY, "container", "run.sh")
SECCOMP = os.path.join(DEPLOY, "container", "seccomp.json")
MKSECCOMP = os.path.join(DEPLOY, "container", "mkseccomp.py")
DAEMONSET = os.path.join(DEPLOY, "kubernetes",
                         "osdstage-exporter-daemonset.yaml")
PODMONITOR = os.path.join(DEPLOY, "kubernetes",
                          "osdstage-exporter-podmonitor.yaml")
README = os.path.join(DEPLOY, "README.md")
ENGINE_DEFAULT_SECCOMP = "/usr/share/containers/seccomp.json"

# the set found on the lab, one capability at a time (deploy/README.md)
CAPS = {"BPF", "PERFMON", "SYS_PTRACE"}
RUNTIME_PKGS = {"python3", "python3-numpy", "python3-prometheus-client",
                "python3-pyelftools", "python3-capstone", "libbpf1"}


def read(path):
    with open(path) as f:
        return f.read()


def unit_settings(text):
    """[(section, key, value)] of a systemd unit (keys may repeat)."""
    out, section = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.append((section, k.strip(), v.strip()))
    return out


def _unit():
    s = unit_settings(read(UNIT))
    return s, {(sec, k): v for sec, k, v in s}


# --- systemd ---------------------------------------------------------------

def test_unit_runs_the_tool_with_restart():
    _, u = _unit()
    assert u[("Service", "ExecStart")].split()[:2] == [
        "/usr/bin/python3", "/opt/osdstage/tools/osdstage_exporter.py"]
    assert u[("Service", "Restart")] == "on-failure"
    assert u[("Install", "WantedBy")] == "multi-user.target"
    assert "/opt/osdstage" in read(UNIT).split("[Unit]")[0], \
        "the header says where the repository is installed"


def test_unit_privileges_and_sandbox():
    _, u = _unit()
    caps = {c[len("CAP_"):] for c in
            u[("Service", "CapabilityBoundingSet")].split()}
    assert caps == CAPS
    assert u[("Service", "NoNewPrivileges")] == "yes"
    assert u.get(("Service", "AmbientCapabilities"), "") == ""
    # every process visible and readable: no ProtectProc=invisible
    assert u[("Service", "ProtectProc")] == "default"
    assert u[("Service", "ProcSubset")] == "all"
    assert u[("Service", "ProtectSystem")] == "strict"
    # the syscall filter lets the two BPF system calls through
    filt = u[("Service", "SystemCallFilter")].split()
    assert "bpf" in filt and "perf_event_open" in filt
    assert "MemoryDenyWriteExecute" not in dict((k, v) for _, k, v in
                                                unit_settings(read(UNIT)))


def test_unit_verifies():
    tool = shutil.which("systemd-analyze")
    need(tool is not None, "systemd-analyze missing (apt-get install systemd)")
    p = subprocess.run([tool, "verify", "--man=no", UNIT],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.strip() == "", p.stderr


# --- the container ---------------------------------------------------------

def test_containerfile():
    text = read(CONTAINERFILE)
    lines = [l for l in text.splitlines() if l and not l.startswith("#")]
    assert lines[0] == "FROM debian:bookworm"
    run = re.search(r"apt-get install[^&]*", text).group(0)
    assert RUNTIME_PKGS <= set(run.split()), run
    for src in ("lib/", "build/*.bpf.o", "build/*.abi.json",
                "tools/osdstage_exporter.py"):
        assert re.search(r"(?m)^COPY .*%s" % re.escape(src), text), src
    entry = re.search(r"(?m)^ENTRYPOINT (.*)$", text).group(1)
    assert json.loads(entry) == [
        "/usr/bin/python3", "/opt/osdstage/tools/osdstage_exporter.py"]
    assert not re.search(r"(?m)^USER ", text)   # root: it traces the host


def _podman_run_args():
    """The options of run.sh's `podman run`."""
    text = read(RUN_SH)
    cmd = re.search(r"exec podman run(.*?)\"\$IMAGE\"", text, re.S).group(1)
    return shlex.split(cmd.replace("\\\n", " "), comments=False)


def test_run_sh_privileges():
    args = _podman_run_args()
    assert "--pid=host" in args
    assert "--cap-drop=all" in args
    adds = [a.split("=", 1)[1] for a in args if a.startswith("--cap-add=")]
    assert len(adds) == 1
    assert {c[len("CAP_"):] for c in adds[0].split(",")} == CAPS
    assert not any(a.startswith("--privileged") for a in args)
    i = args.index("--volume")
    assert args[i + 1] == "/sys/kernel/tracing:/sys/kernel/tracing:ro"
    i = args.index("--security-opt")
    assert args[i + 1] == "seccomp=$HERE/seccomp.json"
    assert "--read-only" in args
    assert "SYS_ADMIN" not in read(RUN_SH)


def test_seccomp_profile_gates_bpf_on_its_capabilities():
    prof = json.loads(read(SECCOMP))
    assert prof["defaultAction"] == "SCMP_ACT_ERRNO"
    rules = {}
    for r in prof["syscalls"]:
        for n in r["names"]:
            rules.setdefault(n, []).append(r)
    for name, cap in (("bpf", "CAP_BPF"), ("perf_event_open",
                                           "CAP_PERFMON")):
        allow = [r for r in rules[name] if r["action"] == "SCMP_ACT_ALLOW"]
        assert len(allow) == 1 and allow[0]["includes"] == {"caps": [cap]}
        deny = [r for r in rules[name] if r["action"] == "SCMP_ACT_ERRNO"]
        assert len(deny) == 1 and deny[0]["excludes"] == {"caps": [cap]}
        assert deny[0]["errnoRet"] == 1
    # the rest of CAP_SYS_ADMIN's rule is still CAP_SYS_ADMIN's
    admin = [r for r in prof["syscalls"]
             if r.get("includes", {}).get("caps") == ["CAP_SYS_ADMIN"]
             and "setns" in r["names"]]
    assert admin and "bpf" not in admin[0]["names"]


def test_seccomp_profile_is_mkseccomps_output():
    """Everything else is the container engine's default profile."""
    need(os.path.exists(ENGINE_DEFAULT_SECCOMP),
         "no %s (apt-get install podman)" % ENGINE_DEFAULT_SECCOMP)
    p = subprocess.run([sys.executable, MKSECCOMP, ENGINE_DEFAULT_SECCOMP],
                       capture_output=True, text=True, check=True)
    assert json.loads(p.stdout) == json.loads(read(SECCOMP)), (
        "deploy/container/seccomp.json is not mkseccomp.py's output for "
        "this host's default profile: regenerate it")
    # and nothing but the two system calls moved
    base = json.loads(read(ENGINE_DEFAULT_SECCOMP))
    ours = json.loads(read(SECCOMP))

    def flat(prof, skip=("bpf", "perf_event_open")):
        return sorted(json.dumps(dict(r, names=sorted(
            n for n in r["names"] if n not in skip)), sort_keys=True)
            for r in prof["syscalls"]
            if [n for n in r["names"] if n not in skip])
    assert flat(base) == flat(ours)
    assert {k: v for k, v in base.items() if k != "syscalls"} == \
        {k: v for k, v in ours.items() if k != "syscalls"}


def test_build_image_script_is_valid_bash():
    for sh in (RUN_SH, os.path.join(DEPLOY, "container", "build-image.sh")):
        p = subprocess.run(["bash", "-n", sh], capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
        assert os.access(sh, os.X_OK), sh


# --- Kubernetes --------------------------------------------------------------

def _yaml_docs(path):
    try:
        import yaml
    except ImportError:
        need(False, "python3-yaml missing (apt-get install python3-yaml)")
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def test_daemonset_shape():
    docs = _yaml_docs(DAEMONSET)
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"DaemonSet", "Service"}
    ds, svc = kinds["DaemonSet"], kinds["Service"]
    assert ds["apiVersion"] == "apps/v1"
    for d in docs:
        assert d["metadata"]["namespace"] == "rook-ceph"
    spec = ds["spec"]
    tmpl = spec["template"]
    labels = tmpl["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    pod = tmpl["spec"]
    assert pod["hostPID"] is True
    assert not pod.get("hostNetwork")
    assert pod.get("automountServiceAccountToken") is False
    # on the nodes that run Rook's OSD pods
    term = pod["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"] == {"app": "rook-ceph-osd"}
    assert term["topologyKey"] == "kubernetes.io/hostname"
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["privileged"] is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) == CAPS
    assert sc["readOnlyRootFilesystem"] is True
    # tracefs and BTF from the host, read-only
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for path in ("/sys/kernel/tracing", "/sys/kernel/btf"):
        m = mounts[path]
        assert m["readOnly"] is True
        assert vols[m["name"]]["hostPath"]["path"] == path
    # resources, ports, probes, scrape annotations
    for k in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][k])
    (port,) = c["ports"]
    assert port["containerPort"] == 9929 and port["name"] == "metrics"
    assert c["args"][:2] == ["--listen", ":9929"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    ann = tmpl["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == str(port["containerPort"])
    # the Service finds the pods and their port
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"


def test_podmonitor_shape():
    (pm,) = _yaml_docs(PODMONITOR)
    assert pm["kind"] == "PodMonitor"
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    ds = [d for d in _yaml_docs(DAEMONSET) if d["kind"] == "DaemonSet"][0]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert pm["spec"]["namespaceSelector"]["matchNames"] == ["rook-ceph"]


# --- the README and the whole folder ---------------------------------------

def test_readme_names_every_privilege_and_way():
    text = read(README)
    for cap in CAPS:
        assert "CAP_" + cap in text, cap
    for word in ("systemd", "podman", "Kubernetes", "Rook", "scrape_configs",
                 "osdstage.json", "--pid=host", "seccomp"):
        assert word in text, word


def test_no_registry_host_names():
    """Images are named locally (localhost/...) or left to the user's
    registry; package mirrors come from the host's apt configuration."""
    hosts = re.compile(r"(?i)\b(deb\.debian\.org|docker\.io|quay\.io|ghcr\."
                       r"io|registry\.k8s\.io|gcr\.io|pypi\.org|"
                       r"snapshot\.debian\.org|registry-1\.docker)\b")
    files = [p for p in glob.glob(os.path.join(DEPLOY, "**", "*"),
                                  recursive=True) if os.path.isfile(p)]
    assert files
    for p in files:
        m = hosts.search(read(p))
        assert not m, "%s names %s" % (p, m.group(0))
