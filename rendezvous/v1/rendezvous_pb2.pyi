from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Header(_message.Message):
    __slots__ = ("protocol_version", "job", "round", "sender_node_id", "auth")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SENDER_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    job: str
    round: int
    sender_node_id: str
    auth: Auth
    def __init__(self, protocol_version: _Optional[int] = ..., job: _Optional[str] = ..., round: _Optional[int] = ..., sender_node_id: _Optional[str] = ..., auth: _Optional[_Union[Auth, _Mapping]] = ...) -> None: ...

class Auth(_message.Message):
    __slots__ = ("scheme", "nonce", "timestamp_ms", "mac")
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    scheme: str
    nonce: bytes
    timestamp_ms: int
    mac: bytes
    def __init__(self, scheme: _Optional[str] = ..., nonce: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., mac: _Optional[bytes] = ...) -> None: ...

class Peer(_message.Message):
    __slots__ = ("node_id", "address", "port", "tf_port", "data_address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TF_PORT_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    port: int
    tf_port: int
    data_address: str
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ..., tf_port: _Optional[int] = ..., data_address: _Optional[str] = ...) -> None: ...

class PeerMessage(_message.Message):
    __slots__ = ("header", "join", "ready", "finished", "heartbeat", "progress", "synced")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    header: Header
    join: JoinRequest
    ready: Ready
    finished: Finished
    heartbeat: Heartbeat
    progress: Progress
    synced: Synced
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., join: _Optional[_Union[JoinRequest, _Mapping]] = ..., ready: _Optional[_Union[Ready, _Mapping]] = ..., finished: _Optional[_Union[Finished, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., synced: _Optional[_Union[Synced, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("epoch", "epochs", "step", "loss", "images_per_s", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    IMAGES_PER_S_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    epochs: int
    step: int
    loss: float
    images_per_s: float
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, epoch: _Optional[int] = ..., epochs: _Optional[int] = ..., step: _Optional[int] = ..., loss: _Optional[float] = ..., images_per_s: _Optional[float] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("peer", "expect", "fingerprint", "expect_min")
    PEER_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    EXPECT_MIN_FIELD_NUMBER: _ClassVar[int]
    peer: Peer
    expect: int
    fingerprint: Fingerprint
    expect_min: int
    def __init__(self, peer: _Optional[_Union[Peer, _Mapping]] = ..., expect: _Optional[int] = ..., fingerprint: _Optional[_Union[Fingerprint, _Mapping]] = ..., expect_min: _Optional[int] = ...) -> None: ...

class Fingerprint(_message.Message):
    __slots__ = ("python", "tensorflow", "gpus", "files", "gpu_ids", "gpu_option", "data_interface")
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    TENSORFLOW_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    GPU_OPTION_FIELD_NUMBER: _ClassVar[int]
    DATA_INTERFACE_FIELD_NUMBER: _ClassVar[int]
    python: str
    tensorflow: str
    gpus: _containers.RepeatedScalarFieldContainer[str]
    files: _containers.ScalarMap[str, str]
    gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    gpu_option: str
    data_interface: str
    def __init__(self, python: _Optional[str] = ..., tensorflow: _Optional[str] = ..., gpus: _Optional[_Iterable[str]] = ..., files: _Optional[_Mapping[str, str]] = ..., gpu_ids: _Optional[_Iterable[str]] = ..., gpu_option: _Optional[str] = ..., data_interface: _Optional[str] = ...) -> None: ...

class Ready(_message.Message):
    __slots__ = ("cluster_digest", "sync")
    CLUSTER_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    cluster_digest: str
    sync: SyncState
    def __init__(self, cluster_digest: _Optional[str] = ..., sync: _Optional[_Union[SyncState, _Mapping]] = ...) -> None: ...

class Finished(_message.Message):
    __slots__ = ("exit_code", "reason", "sync", "failure")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    reason: str
    sync: SyncState
    failure: CommandFailure
    def __init__(self, exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., sync: _Optional[_Union[SyncState, _Mapping]] = ..., failure: _Optional[_Union[CommandFailure, _Mapping]] = ...) -> None: ...

class CommandFailure(_message.Message):
    __slots__ = ("node_id", "address", "rank", "exit_code", "signal", "reason", "error_type", "message", "tail", "from_error_file", "known")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    FROM_ERROR_FILE_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    rank: int
    exit_code: int
    signal: str
    reason: str
    error_type: str
    message: str
    tail: _containers.RepeatedScalarFieldContainer[str]
    from_error_file: bool
    known: str
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., rank: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., reason: _Optional[str] = ..., error_type: _Optional[str] = ..., message: _Optional[str] = ..., tail: _Optional[_Iterable[str]] = ..., from_error_file: _Optional[bool] = ..., known: _Optional[str] = ...) -> None: ...

class CoordinatorMessage(_message.Message):
    __slots__ = ("header", "waiting", "frozen", "release", "redirect", "rejected", "aborted", "heartbeat", "completed", "sync_from")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    FROZEN_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SYNC_FROM_FIELD_NUMBER: _ClassVar[int]
    header: Header
    waiting: Waiting
    frozen: Frozen
    release: Release
    redirect: Redirect
    rejected: Rejected
    aborted: Aborted
    heartbeat: Heartbeat
    completed: Completed
    sync_from: SyncFrom
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., waiting: _Optional[_Union[Waiting, _Mapping]] = ..., frozen: _Optional[_Union[Frozen, _Mapping]] = ..., release: _Optional[_Union[Release, _Mapping]] = ..., redirect: _Optional[_Union[Redirect, _Mapping]] = ..., rejected: _Optional[_Union[Rejected, _Mapping]] = ..., aborted: _Optional[_Union[Aborted, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., completed: _Optional[_Union[Completed, _Mapping]] = ..., sync_from: _Optional[_Union[SyncFrom, _Mapping]] = ...) -> None: ...

class Completed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Waiting(_message.Message):
    __slots__ = ("joined", "expect", "expect_min")
    JOINED_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    EXPECT_MIN_FIELD_NUMBER: _ClassVar[int]
    joined: _containers.RepeatedCompositeFieldContainer[Peer]
    expect: int
    expect_min: int
    def __init__(self, joined: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., expect: _Optional[int] = ..., expect_min: _Optional[int] = ...) -> None: ...

class Frozen(_message.Message):
    __slots__ = ("members", "cluster_digest", "warnings", "liveness_timeout", "gpus")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DIGEST_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Peer]
    cluster_digest: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    liveness_timeout: float
    gpus: int
    def __init__(self, members: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., cluster_digest: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., liveness_timeout: _Optional[float] = ..., gpus: _Optional[int] = ...) -> None: ...

class Release(_message.Message):
    __slots__ = ("start_at_unix_ns", "delay_ns")
    START_AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    start_at_unix_ns: int
    delay_ns: int
    def __init__(self, start_at_unix_ns: _Optional[int] = ..., delay_ns: _Optional[int] = ...) -> None: ...

class Redirect(_message.Message):
    __slots__ = ("coordinator", "reason")
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    coordinator: Peer
    reason: str
    def __init__(self, coordinator: _Optional[_Union[Peer, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Rejected(_message.Message):
    __slots__ = ("reason", "message")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[Rejected.Reason]
        EXPECT_MISMATCH: _ClassVar[Rejected.Reason]
        ALREADY_FROZEN: _ClassVar[Rejected.Reason]
        DUPLICATE_NODE: _ClassVar[Rejected.Reason]
        ENDPOINT_CLASH: _ClassVar[Rejected.Reason]
        VERSION_MISMATCH: _ClassVar[Rejected.Reason]
        BAD_REQUEST: _ClassVar[Rejected.Reason]
    REASON_UNSPECIFIED: Rejected.Reason
    EXPECT_MISMATCH: Rejected.Reason
    ALREADY_FROZEN: Rejected.Reason
    DUPLICATE_NODE: Rejected.Reason
    ENDPOINT_CLASH: Rejected.Reason
    VERSION_MISMATCH: Rejected.Reason
    BAD_REQUEST: Rejected.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: Rejected.Reason
    message: str
    def __init__(self, reason: _Optional[_Union[Rejected.Reason, str]] = ..., message: _Optional[str] = ...) -> None: ...

class Aborted(_message.Message):
    __slots__ = ("reason", "exit_code", "final", "preflight", "stop", "failure")
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    exit_code: int
    final: bool
    preflight: bool
    stop: StopOrder
    failure: CommandFailure
    def __init__(self, reason: _Optional[str] = ..., exit_code: _Optional[int] = ..., final: _Optional[bool] = ..., preflight: _Optional[bool] = ..., stop: _Optional[_Union[StopOrder, _Mapping]] = ..., failure: _Optional[_Union[CommandFailure, _Mapping]] = ...) -> None: ...

class StopOrder(_message.Message):
    __slots__ = ("address", "user", "reason", "stop_grace")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_GRACE_FIELD_NUMBER: _ClassVar[int]
    address: str
    user: str
    reason: str
    stop_grace: float
    def __init__(self, address: _Optional[str] = ..., user: _Optional[str] = ..., reason: _Optional[str] = ..., stop_grace: _Optional[float] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("header", "caller", "about")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    ABOUT_FIELD_NUMBER: _ClassVar[int]
    header: Header
    caller: AdvertRecord
    about: AdvertRecord
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., caller: _Optional[_Union[AdvertRecord, _Mapping]] = ..., about: _Optional[_Union[AdvertRecord, _Mapping]] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("header", "self", "phase", "expect", "coordinator", "members", "tf_config", "rank", "seen", "trainer_pid", "trainer_uptime_seconds", "exit_code", "fingerprint", "tensorflow", "gpus", "preflight", "progress", "expect_min", "gpu_count", "failure", "ending", "warm_pid", "warm_rss_bytes", "silent", "silent_seconds")
    class TensorflowEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class GpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    TF_CONFIG_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    TRAINER_PID_FIELD_NUMBER: _ClassVar[int]
    TRAINER_UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TENSORFLOW_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_MIN_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ENDING_FIELD_NUMBER: _ClassVar[int]
    WARM_PID_FIELD_NUMBER: _ClassVar[int]
    WARM_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    SILENT_FIELD_NUMBER: _ClassVar[int]
    SILENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    header: Header
    self: Peer
    phase: str
    expect: int
    coordinator: Peer
    members: _containers.RepeatedCompositeFieldContainer[Peer]
    tf_config: str
    rank: int
    seen: _containers.RepeatedCompositeFieldContainer[Peer]
    trainer_pid: int
    trainer_uptime_seconds: float
    exit_code: int
    fingerprint: Fingerprint
    tensorflow: _containers.ScalarMap[str, str]
    gpus: _containers.ScalarMap[str, str]
    preflight: _containers.RepeatedScalarFieldContainer[str]
    progress: Progress
    expect_min: int
    gpu_count: int
    failure: CommandFailure
    ending: str
    warm_pid: int
    warm_rss_bytes: int
    silent: _containers.RepeatedCompositeFieldContainer[Peer]
    silent_seconds: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self_, header: _Optional[_Union[Header, _Mapping]] = ..., self: _Optional[_Union[Peer, _Mapping]] = ..., phase: _Optional[str] = ..., expect: _Optional[int] = ..., coordinator: _Optional[_Union[Peer, _Mapping]] = ..., members: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., tf_config: _Optional[str] = ..., rank: _Optional[int] = ..., seen: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., trainer_pid: _Optional[int] = ..., trainer_uptime_seconds: _Optional[float] = ..., exit_code: _Optional[int] = ..., fingerprint: _Optional[_Union[Fingerprint, _Mapping]] = ..., tensorflow: _Optional[_Mapping[str, str]] = ..., gpus: _Optional[_Mapping[str, str]] = ..., preflight: _Optional[_Iterable[str]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., expect_min: _Optional[int] = ..., gpu_count: _Optional[int] = ..., failure: _Optional[_Union[CommandFailure, _Mapping]] = ..., ending: _Optional[str] = ..., warm_pid: _Optional[int] = ..., warm_rss_bytes: _Optional[int] = ..., silent: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., silent_seconds: _Optional[_Iterable[float]] = ...) -> None: ...

class MemberStatus(_message.Message):
    __slots__ = ("peer", "rank", "phase", "command_uptime_seconds", "exit_code", "progress", "straggler", "heard_seconds_ago", "silent")
    PEER_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    STRAGGLER_FIELD_NUMBER: _ClassVar[int]
    HEARD_SECONDS_AGO_FIELD_NUMBER: _ClassVar[int]
    SILENT_FIELD_NUMBER: _ClassVar[int]
    peer: Peer
    rank: int
    phase: str
    command_uptime_seconds: float
    exit_code: int
    progress: Progress
    straggler: bool
    heard_seconds_ago: float
    silent: bool
    def __init__(self, peer: _Optional[_Union[Peer, _Mapping]] = ..., rank: _Optional[int] = ..., phase: _Optional[str] = ..., command_uptime_seconds: _Optional[float] = ..., exit_code: _Optional[int] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., straggler: _Optional[bool] = ..., heard_seconds_ago: _Optional[float] = ..., silent: _Optional[bool] = ...) -> None: ...

class JobStatusResponse(_message.Message):
    __slots__ = ("header", "coordinating", "coordinator", "phase", "expect", "restarts", "last_abort_reason", "members", "expect_min", "last_failure")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COORDINATING_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_MIN_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_FIELD_NUMBER: _ClassVar[int]
    header: Header
    coordinating: bool
    coordinator: Peer
    phase: str
    expect: int
    restarts: int
    last_abort_reason: str
    members: _containers.RepeatedCompositeFieldContainer[MemberStatus]
    expect_min: int
    last_failure: CommandFailure
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., coordinating: _Optional[bool] = ..., coordinator: _Optional[_Union[Peer, _Mapping]] = ..., phase: _Optional[str] = ..., expect: _Optional[int] = ..., restarts: _Optional[int] = ..., last_abort_reason: _Optional[str] = ..., members: _Optional[_Iterable[_Union[MemberStatus, _Mapping]]] = ..., expect_min: _Optional[int] = ..., last_failure: _Optional[_Union[CommandFailure, _Mapping]] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("header", "user", "reason", "stop_grace", "node_id")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_GRACE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    header: Header
    user: str
    reason: str
    stop_grace: float
    node_id: str
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., user: _Optional[str] = ..., reason: _Optional[str] = ..., stop_grace: _Optional[float] = ..., node_id: _Optional[str] = ...) -> None: ...

class StopResponse(_message.Message):
    __slots__ = ("header", "coordinating", "coordinator", "members", "round", "phase")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COORDINATING_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    header: Header
    coordinating: bool
    coordinator: Peer
    members: _containers.RepeatedCompositeFieldContainer[Peer]
    round: int
    phase: str
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., coordinating: _Optional[bool] = ..., coordinator: _Optional[_Union[Peer, _Mapping]] = ..., members: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., round: _Optional[int] = ..., phase: _Optional[str] = ...) -> None: ...

class PreviousChief(_message.Message):
    __slots__ = ("node_id", "address", "round", "started_unix_ns")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    round: int
    started_unix_ns: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., round: _Optional[int] = ..., started_unix_ns: _Optional[int] = ...) -> None: ...

class SyncState(_message.Message):
    __slots__ = ("digest", "files", "total_bytes", "newest_mtime_ns", "previous", "error")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    NEWEST_MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    digest: str
    files: int
    total_bytes: int
    newest_mtime_ns: int
    previous: PreviousChief
    error: str
    def __init__(self, digest: _Optional[str] = ..., files: _Optional[int] = ..., total_bytes: _Optional[int] = ..., newest_mtime_ns: _Optional[int] = ..., previous: _Optional[_Union[PreviousChief, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class SyncFrom(_message.Message):
    __slots__ = ("source", "digest", "total_bytes", "final", "reason")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source: Peer
    digest: str
    total_bytes: int
    final: bool
    reason: str
    def __init__(self, source: _Optional[_Union[Peer, _Mapping]] = ..., digest: _Optional[str] = ..., total_bytes: _Optional[int] = ..., final: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class Synced(_message.Message):
    __slots__ = ("digest", "error")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    digest: str
    error: str
    def __init__(self, digest: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ManifestRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: Header
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ...) -> None: ...

class FileEntry(_message.Message):
    __slots__ = ("path", "size", "mtime_ns", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    mtime_ns: int
    sha256: str
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class ManifestResponse(_message.Message):
    __slots__ = ("header", "files")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    header: Header
    files: _containers.RepeatedCompositeFieldContainer[FileEntry]
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., files: _Optional[_Iterable[_Union[FileEntry, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("header", "digest", "paths")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    header: Header
    digest: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., digest: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("path", "offset", "data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    data: bytes
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Adverts(_message.Message):
    __slots__ = ("header", "adverts", "known")
    class KnownEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HEADER_FIELD_NUMBER: _ClassVar[int]
    ADVERTS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    header: Header
    adverts: _containers.RepeatedCompositeFieldContainer[AdvertRecord]
    known: _containers.ScalarMap[str, int]
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., adverts: _Optional[_Iterable[_Union[AdvertRecord, _Mapping]]] = ..., known: _Optional[_Mapping[str, int]] = ...) -> None: ...

class AdvertRecord(_message.Message):
    __slots__ = ("address", "port", "txt", "serial", "goodbye")
    class TxtEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TXT_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    address: str
    port: int
    txt: _containers.ScalarMap[str, str]
    serial: int
    goodbye: bool
    def __init__(self, address: _Optional[str] = ..., port: _Optional[int] = ..., txt: _Optional[_Mapping[str, str]] = ..., serial: _Optional[int] = ..., goodbye: _Optional[bool] = ...) -> None: ...
