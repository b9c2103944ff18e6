"""Stand-ins for what a preflight reads on a host: TensorFlow's package metadata in a
site directory and an nvidia-smi that lists GPUs."""

from __future__ import annotations

from pathlib import Path


def fake_tensorflow(site: Path, version: str, name: str = "tensorflow") -> Path:
    """A directory that holds nothing but the package metadata of `name` `version`."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def fake_nvidia_smi(bin_dir: Path, count: int, model: str = "NVIDIA H100 80GB HBM3", uuids: bool = False) -> Path:
    """An nvidia-smi that lists `count` GPUs of `model`, one a line, each followed by its
    UUID (`, GPU-0000...`) with `uuids`, as `--query-gpu=name,uuid` prints them."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    rows = [f"{model}, GPU-{i:08d}-0000-0000-0000-000000000000" if uuids else model for i in range(count)]
    lines = "\\n".join(rows)
    smi.write_text(f"#!/bin/sh\nprintf '{lines}\\n'\n")
    smi.chmod(0o755)
    return bin_dir
