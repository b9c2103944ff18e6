"""Preflight: do the frozen members run the same environment? Compared at the freeze.

MultiWorkerMirroredStrategy hangs or fails deep in its collectives, with messages that name
no node, when its workers differ: another TensorFlow major.minor, or another GPU count (the
workers then disagree on the number of replicas in sync). Those differences always refuse
the round, unless `--gpus min` or `--gpus N` gives every command the same number of
them (`core.gpus`). Others (the GPU model, the Python version, the TensorFlow patch level, a
`--same-file` digest) usually mean a mistake too, so they refuse by default; each kind can
be allowed with `--allow-mismatch KIND` and is then only a warning.

Nothing here reads a file or runs a program: `rendezvous.host.fingerprint` takes the fingerprint.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum
from typing import Callable, Hashable, Mapping, Optional, Sequence

from ..errors import MembershipError
from .gpus import GpuChoice, GpuMode, GpuPolicy, choose_count
from .peer import Peer
from .record import field, record

#: The exit code of every node of a refused job: this peer cannot be part of it.
REFUSED = MembershipError.exit_code


class Mismatch(str, Enum):
    """A kind of difference between members, as `--allow-mismatch` names it."""

    TENSORFLOW = "tensorflow"  # major.minor: always fatal
    GPU_COUNT = "gpu-count"  # always fatal (with --gpus all)
    GPU_OPTION = "gpus-option"  # --gpus itself: always fatal
    DATA_NETWORK = "data-network"  # a data network on some nodes only: always fatal
    TENSORFLOW_PATCH = "tensorflow-patch"
    PYTHON = "python"
    GPU_MODEL = "gpu-model"
    SAME_FILE = "same-file"


ALWAYS_FATAL = frozenset({Mismatch.TENSORFLOW, Mismatch.GPU_COUNT, Mismatch.GPU_OPTION, Mismatch.DATA_NETWORK})
#: What `--allow-mismatch` accepts.
ALLOWABLE = tuple(kind.value for kind in Mismatch if kind not in ALWAYS_FATAL)


@record
class Fingerprint:
    """What a member's command will run with.

    `tensorflow` is None where the command's interpreter has no TensorFlow; `gpus` holds one
    model name per GPU the command can see (empty without nvidia-smi), `gpu_ids` the same
    GPUs as `CUDA_VISIBLE_DEVICES` names them (`0`, `GPU-8f1e...`; this node's own choice
    at the freeze is made of them); `files` maps each `--same-file` path as given to the
    SHA-256 of its content, or to None where the file cannot be read. `gpu_option` is the
    node's `--gpus`, and `data_interface` the interface of its data network (empty
    without one): every member must agree on the first and have the second or not alike.
    """

    python: str
    tensorflow: Optional[str] = None
    gpus: tuple[str, ...] = ()
    files: Mapping[str, Optional[str]] = field(default_factory=dict)
    gpu_ids: tuple[str, ...] = ()
    gpu_option: str = "all"
    data_interface: str = ""

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def describe_gpus(self) -> str:
        return describe_gpus(self.gpus)

    def describe(self) -> str:
        """`Python 3.11.9, TensorFlow 2.21.0, GPUs 8x NVIDIA H100`."""
        tensorflow = f"TensorFlow {self.tensorflow}" if self.tensorflow else "no TensorFlow"
        return f"Python {self.python}, {tensorflow}, GPUs {self.describe_gpus()}"


@record
class Difference:
    kind: Mismatch
    message: str  # names the nodes and the values: `10.0.0.12 has 4 GPUs, the others 8`


@record
class Verdict:
    """The differences that refuse the round, and those allowed, which every node logs."""

    fatal: tuple[Difference, ...] = ()
    warnings: tuple[Difference, ...] = ()
    # --gpus: how many GPUs every member's command uses (None: each its own), and why
    gpus: Optional[int] = None
    gpu_note: Optional[str] = None

    @property
    def refused(self) -> bool:
        return bool(self.fatal)

    @property
    def reason(self) -> str:
        """`preflight: 10.0.0.12 has 4 GPUs, the others 8; ...`."""
        return "preflight: " + "; ".join(d.message for d in self.fatal)

    def warning_lines(self) -> tuple[str, ...]:
        allowed = tuple(f"preflight: {d.message} (allowed by --allow-mismatch {d.kind.value})" for d in self.warnings)
        return allowed + ((f"preflight: {self.gpu_note}",) if self.gpu_note else ())


def describe_gpus(models: Sequence[str]) -> str:
    """`8x NVIDIA H100 80GB HBM3`, `4x A100 + 4x H100`, or `none`."""
    counts = Counter(models)
    return " + ".join(f"{n}x {model}" for model, n in sorted(counts.items())) or "none"


def major_minor(version: Optional[str]) -> Optional[str]:
    """`2.21.0` -> `2.21`; a version without a minor part stays as it is."""
    if version is None:
        return None
    return ".".join(version.split(".")[:2])


@record
class _Aspect:
    """One property compared across members: `key` groups them, `text` shows a member's
    value (`8`), `full` says what a node has (`8` -> `8 GPUs`); only the members for which
    `compared` holds take part."""

    kind: Mismatch
    key: Callable[[Fingerprint], Hashable]
    text: Callable[[Fingerprint], str]
    full: Callable[[str], str]
    compared: Callable[[Fingerprint], bool] = lambda f: True
    hint: str = ""  # what to do, said once after the difference


def _gpus(text: str) -> str:
    return f"{text} GPU" if text == "1" else f"{text} GPUs"


_ASPECTS = (
    _Aspect(Mismatch.TENSORFLOW, lambda f: major_minor(f.tensorflow), lambda f: f.tensorflow or "none",
            lambda t: "no TensorFlow" if t == "none" else f"TensorFlow {t}"),
    _Aspect(Mismatch.TENSORFLOW_PATCH, lambda f: f.tensorflow, lambda f: f.tensorflow or "none",
            lambda t: f"TensorFlow {t}"),
    _Aspect(Mismatch.GPU_COUNT, lambda f: f.gpu_count, lambda f: str(f.gpu_count), _gpus),
    # the models alone, of the nodes that have GPUs: the count is compared on its own
    _Aspect(Mismatch.GPU_MODEL, lambda f: tuple(sorted(set(f.gpus))), Fingerprint.describe_gpus,
            lambda t: f"GPUs {t}", compared=lambda f: bool(f.gpus)),
    _Aspect(Mismatch.PYTHON, lambda f: f.python, lambda f: f.python, lambda t: f"Python {t}"),
    _Aspect(Mismatch.GPU_OPTION, lambda f: f.gpu_option, lambda f: f.gpu_option,
            lambda t: f"--gpus {t}", hint="give every node the same --gpus"),
    _Aspect(Mismatch.DATA_NETWORK, lambda f: bool(f.data_interface),
            lambda f: "a data network" if f.data_interface else "no data network", lambda t: t,
            hint="give every node --data-interface or --data-address, or none of them"),
)


def _file_aspect(path: str) -> _Aspect:
    """A `--same-file`: its digest, `none` where it cannot be read, `not named` on a node
    started without that --same-file (digests are hex, so neither is one)."""

    def text(f: Fingerprint) -> str:
        if path not in f.files:
            return "not named"
        digest = f.files[path]
        return digest[:12] if digest else "none"

    def full(t: str) -> str:
        if t == "not named":
            return f"no --same-file {path}"
        return f"no readable {path}" if t == "none" else f"{path} with SHA-256 {t}"

    return _Aspect(Mismatch.SAME_FILE, lambda f: f.files.get(path, "not named"), text, full)


def _names(peers: Sequence[Peer]) -> dict[str, str]:
    """How messages name each member: its address, or its endpoint where addresses repeat."""
    counts = Counter(p.address for p in peers)
    return {p.node_id: str(p.address) if counts[p.address] == 1 else p.endpoint for p in peers}


def _difference(aspect: _Aspect, members: Sequence[tuple[Peer, Fingerprint]], names: dict[str, str]) -> Optional[Difference]:
    """`10.0.0.12 has 4 GPUs, the others 8` when one value is the most common; else every
    group: `10.0.0.1, 10.0.0.2 have 8 GPUs; 10.0.0.3, 10.0.0.4 have 4 GPUs`."""
    groups: dict[Hashable, list[tuple[Peer, Fingerprint]]] = {}
    for peer, fingerprint in members:
        if aspect.compared(fingerprint):
            groups.setdefault(aspect.key(fingerprint), []).append((peer, fingerprint))
    if len(groups) < 2:
        return None
    ranked = sorted(groups.values(), key=len, reverse=True)  # stable: in member order otherwise
    texts = [" or ".join(sorted({aspect.text(f) for _, f in group})) for group in ranked]
    parts = [
        f"{', '.join(names[p.node_id] for p, _ in group)} {'has' if len(group) == 1 else 'have'} {aspect.full(text)}"
        for group, text in zip(ranked, texts)
    ]
    hint = f" ({aspect.hint})" if aspect.hint else ""
    if len(ranked[0]) > len(ranked[1]):
        return Difference(aspect.kind, ", ".join(parts[1:]) + f", the others {texts[0]}{hint}")
    return Difference(aspect.kind, "; ".join(parts) + hint)


def _skipped(gpus: GpuPolicy) -> frozenset[Mismatch]:
    """What --gpus makes irrelevant: the count unless it is `all`, the models with `none`."""
    if gpus.mode is GpuMode.ALL:
        return frozenset()
    return frozenset({Mismatch.GPU_COUNT, Mismatch.GPU_MODEL} if gpus.mode is GpuMode.NONE else {Mismatch.GPU_COUNT})


def compare(members: Sequence[tuple[Peer, Fingerprint]], allowed: frozenset[Mismatch] = frozenset(),
            gpus: GpuPolicy = GpuPolicy()) -> Verdict:
    """The differences between the members' fingerprints: fatal unless their kind is in
    `allowed` (TensorFlow major.minor, the GPU count with `--gpus all`, `--gpus` itself and
    a data network on some nodes only are fatal anyway). Versions that differ in
    major.minor are not reported again as differing patch levels. `gpus` (the job's
    `--gpus`) decides how many GPUs every command uses; a node with too few is refused."""
    names = _names([p for p, _ in members])
    files = sorted({path for _, f in members for path in f.files})
    aspects = [a for a in _ASPECTS if a.kind not in _skipped(gpus)]
    found = [d for a in (*aspects, *map(_file_aspect, files)) if (d := _difference(a, members, names))]
    if any(d.kind is Mismatch.TENSORFLOW for d in found):
        found = [d for d in found if d.kind is not Mismatch.TENSORFLOW_PATCH]
    found.extend(filter(None, [_data_families(members, names)]))
    choice = GpuChoice()
    if not any(d.kind is Mismatch.GPU_OPTION for d in found):
        choice = choose_count(gpus, [(names[p.node_id], f.gpu_count) for p, f in members])
        if choice.refusal:
            found.append(Difference(Mismatch.GPU_COUNT, choice.refusal))
    fatal = tuple(d for d in found if d.kind in ALWAYS_FATAL or d.kind not in allowed)
    warnings = tuple(d for d in found if d not in fatal)
    return Verdict(_with_hints(fatal), warnings, choice.count, choice.note)


def _data_families(members: Sequence[tuple[Peer, Fingerprint]], names: dict[str, str]) -> Optional[Difference]:
    """Data addresses of both IP families: the workers could not reach each other."""
    by_family: dict[int, list[str]] = {}
    for peer, _ in members:
        if peer.data_address is not None:
            by_family.setdefault(peer.data_address.version, []).append(names[peer.node_id])
    if len(by_family) < 2:
        return None
    parts = [f"{', '.join(who)} {'has an' if len(who) == 1 else 'have'} IPv{version} data address"
             f"{'' if len(who) == 1 else 'es'}" for version, who in sorted(by_family.items())]
    return Difference(Mismatch.DATA_NETWORK, "; ".join(parts) + " (give every node a data address of one IP family)")


def _with_hints(fatal: tuple[Difference, ...]) -> tuple[Difference, ...]:
    """A refused difference that may be allowed says how."""
    return tuple(
        d if d.kind in ALWAYS_FATAL else Difference(d.kind, f"{d.message} (allow with --allow-mismatch {d.kind.value})")
        for d in fatal
    )
