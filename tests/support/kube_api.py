"""Just enough of a Kubernetes API server for `kubectl apply --dry-run=client`.

A client-side dry run still asks the server which kinds exist (discovery: /api, /apis and
each group version's resource list) and whether each object exists already (a GET, here
always 404: "created (dry run)"). This serves those answers for the core group and batch/v1
on 127.0.0.1, and a kubeconfig that points kubectl at it. kubectl's schema validation would
need the server's whole OpenAPI document: it runs with --validate=false, and the manifests'
fields are checked by the test against the kinds it uses.

    with KubeApi(tmp_path) as api:
        subprocess.run(["kubectl", "--kubeconfig", api.kubeconfig, "apply", "--dry-run=client",
                        "--validate=false", "-f", "job.yaml"])
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RESOURCES = {
    "v1": [("services", "Service", True), ("secrets", "Secret", True), ("pods", "Pod", True),
           ("configmaps", "ConfigMap", True), ("namespaces", "Namespace", False)],
    "batch/v1": [("jobs", "Job", True), ("cronjobs", "CronJob", True)],
}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resource_list(group_version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
        "resources": [{"name": name, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                       "verbs": _VERBS} for name, kind, namespaced in _RESOURCES[group_version]],
    }


_ANSWERS: dict[str, dict[str, Any]] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}]},
    "/api/v1": _resource_list("v1"),
    "/apis/batch/v1": _resource_list("batch/v1"),
    "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0"},
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        path = self.path.split("?", 1)[0]
        body = _ANSWERS.get(path)
        status = 200
        if body is None:
            status = 404
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                    "message": f"{path} not found"}
        self.server.asked.append(path)  # type: ignore[attr-defined]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class KubeApi:
    def __init__(self, directory: Path) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.asked = []  # type: ignore[attr-defined]
        port = self.server.server_address[1]
        self.kubeconfig = str(Path(directory) / "kubeconfig")
        Path(self.kubeconfig).write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": "default"}}],
            "users": [{"name": "test", "user": {}}],
        }))
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def asked(self) -> list[str]:
        return list(self.server.asked)  # type: ignore[attr-defined]

    def __enter__(self) -> "KubeApi":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
