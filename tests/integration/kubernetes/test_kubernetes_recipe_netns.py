"""The Kubernetes recipe (deploy/kubernetes/): the manifests pass `kubectl apply
--dry-run=client`, and pods played by network namespaces, resolving the headless Service's
name through a real DNS server (dnsmasq) the way cluster DNS answers it, form their job
with the container's own command line, on a network that passes no multicast."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kube_api import KubeApi
from patience import HANG, wait_until
from paths import REPO
from peers import RECORDER, assert_consistent, start_peer, wait_for_records

DEPLOY = REPO / "deploy" / "kubernetes"
CLUSTER_DOMAIN = "cluster.local"
NAMESPACE = "default"


def manifests() -> dict[str, dict]:
    found = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            found[doc["kind"]] = doc
    return found


def container(job: dict) -> dict:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def test_the_manifests_tie_the_job_to_its_service_its_ports_and_its_secret():
    found = manifests()
    job, service = found["Job"], found["Service"]
    spec, pod = job["spec"], job["spec"]["template"]
    c = container(job)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert spec["completionMode"] == "Indexed"
    assert env["RENDEZVOUS_EXPECT"] == str(spec["completions"]) == str(spec["parallelism"])
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert f"--peer={service['metadata']['name']}" in c["args"]
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= named.keys()
    assert named["rendezvous"] == 29630 and f"--tf-port={named['tensorflow']}" in c["args"]
    (volume,) = pod["spec"]["volumes"]
    (mount,) = c["volumeMounts"]
    assert volume["name"] == mount["name"] and volume["secret"]["defaultMode"] == 0o400
    # a file of its own: a Secret volume's files are symbolic links, which --token-file refuses
    assert mount["subPath"] == "token" and f"--token-file={mount['mountPath']}" in c["args"]


def test_kubectl_apply_dry_run_accepts_the_manifests(tmp_path):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed: scripts/setup installs it (Debian's kubernetes-client)"
    with KubeApi(tmp_path) as api:
        done = subprocess.run([kubectl, "--kubeconfig", api.kubeconfig, "apply", "--dry-run=client",
                               "--validate=false", "-f", str(DEPLOY)], capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["job.batch/train created (dry run)", "service/train created (dry run)"]
    # and a manifest it could not map is an error, so the pass above means something
    bad = tmp_path / "bad.yaml"
    bad.write_text((DEPLOY / "job.yaml").read_text().replace("kind: Job", "kind: Jobb"))
    with KubeApi(tmp_path) as api:
        refused = subprocess.run([kubectl, "--kubeconfig", api.kubeconfig, "apply", "--dry-run=client",
                                  "--validate=false", "-f", str(bad)], capture_output=True, text=True, timeout=HANG)
    assert refused.returncode != 0 and "Jobb" in refused.stderr


def pod_argv(job: dict, token: Path, command: list[str]) -> list[str]:
    """The container's command line as a pod runs it: the token at its path in the test,
    the training command replaced by `command`."""
    c = container(job)
    args = list(c["args"])
    args = args[:args.index("--")]
    mount = c["volumeMounts"][0]["mountPath"]
    args = [a.replace(mount, str(token)) for a in args]
    assert c["command"] == ["rendezvous", "join"]
    return [sys.executable, "-m", "rendezvous", "join", *args, "--timeout", str(HANG), "--", *command]


@pytest.mark.netns
def test_pods_find_each_other_through_the_headless_service_s_dns_name_without_multicast(make_network, tmp_path):
    found = manifests()
    job, service = found["Job"], found["Service"]
    pods_n = job["spec"]["completions"]
    net = make_network(pods_n + 1, multicast=False)
    pods, dns = net.hosts[:pods_n], net.hosts[pods_n]
    name = f"{service['metadata']['name']}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"
    records = tmp_path / "dns-hosts"
    records.write_text("".join(f"{p.address} {name}\n" for p in pods))  # one A record per pod
    dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
    assert os.access(dnsmasq, os.X_OK), "dnsmasq is not installed: scripts/setup installs dnsmasq-base"
    server = dns.popen([dnsmasq, "--keep-in-foreground", "--no-resolv", "--no-hosts", f"--addn-hosts={records}",
                        f"--listen-address={dns.address}", "--bind-interfaces", "--user=root", "--log-queries",
                        "--log-facility=-", f"--pid-file={tmp_path / 'dnsmasq.pid'}"],
                       stdout=open(tmp_path / "dnsmasq.log", "w"), stderr=subprocess.STDOUT)
    for pod in pods:  # what kubelet writes into a pod's resolv.conf
        pod.write_resolv_conf(dns.address, [f"{NAMESPACE}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}",
                                            CLUSTER_DOMAIN], ndots=5)
    resolved = pods[0].run([sys.executable, "-c", "import socket; print(sorted({a[4][0] for a in "
                            f"socket.getaddrinfo({service['metadata']['name']!r}, None)}}))"],
                           capture_output=True, text=True, timeout=HANG)
    assert resolved.stdout.strip() == str(sorted(p.address for p in pods)), (resolved.stderr, server.poll())

    token = tmp_path / "token"
    token.write_text(os.urandom(16).hex())
    token.chmod(0o600)
    out = tmp_path / "out"
    out.mkdir()
    env = {e["name"]: e["value"] for e in container(job)["env"]}
    peers = [start_peer(pod_argv(job, token, [sys.executable, str(RECORDER), str(out)]), tmp_path, pod.name,
                        popen=pod.popen, extra_env=env) for pod in pods]
    recs = wait_for_records(out, pods_n)
    assert_consistent(recs, [p.address for p in pods])
    assert all(r["tf_config"]["cluster"]["worker"][i].endswith(":2222") for i, r in enumerate(recs))
    for peer in peers:
        assert peer.wait() == 0, peer.log
    wait_until(lambda: name in (tmp_path / "dnsmasq.log").read_text(), "dnsmasq logs the pods' queries")
    server.terminate()
