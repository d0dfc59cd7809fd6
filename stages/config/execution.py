"""Execution keys: how machines run the work (config groups ``cluster``, ``node``, ``upload``,
``monitor``, ``unreal``). They never change an output byte, so DVC tracks none of them, except
the three data keys of ``cluster`` (``nodes``, ``node``, ``passes``) that the pools stage reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClusterConfig:
    # node ids of the cluster; pools partition the retained levels, one pool per node
    nodes: list[str] = field(default_factory=lambda: ["local"])
    # the node this machine runs as (its pool feeds trajectories); empty: every pool
    node: str = ""
    # passes over each pool, each in its own shuffled order
    passes: int = 1
    # --- the Ray executor (execution only; the pools stage reads nodes and passes) ---
    # Ray GCS port of `wmforge cluster up --head` (workers join HOST:PORT)
    head_port: int = 6379
    # Ray's dashboard (an HTTP server and several processes); off by default
    include_dashboard: bool = False
    # a lease not renewed for this long expires and its unit is handed out again, s
    lease_s: float = 120.0
    # the allocator's persisted state (on the head's disk); a restart reads it back
    allocator_state: str = "work/allocator/state.json"
    # the allocator's HTTP status port (0 = a free port, written next to the state file)
    allocator_http_port: int = 0
    # engine processes run as this unprivileged user when the engine requires it (Unreal
    # refuses root); empty = the runner's own user
    engine_user: str = ""
    # a runner actor whose process (a Ray worker) crashes is restarted on its node this often;
    # one crash more and its node leaves the run (its levels move to the others)
    runner_restarts: int = 3
    # a runner's call failed: how long the driver waits for the runner to answer again (a
    # process crash, restarted by Ray) before it counts the runner's node as lost, s
    death_check_s: float = 60.0
    # a runner that Ray reports dead this long while its node lives has used up its restarts, s
    dead_runner_s: float = 20.0


@dataclass
class NodeConfig:
    """The node runner (DESIGN §6, paper §5.3): slots of this machine and their lifecycle.
    Execution settings only: they never change output bytes, so DVC does not track them."""

    # GPU ids (NVML / CUDA PCI order) to run slots on; empty = every GPU NVML finds (none on a
    # machine without an NVIDIA driver, which then runs cpu_slots)
    gpus: list[int] = field(default_factory=list)
    # engine processes per GPU (§5.3: one process does not saturate a GPU)
    slots_per_gpu: int = 4
    # slots on a machine without a GPU (2 measured fastest on the 2-core development machine)
    cpu_slots: int = 2
    # a slot whose progress log and outputs have not advanced for this long is killed, s
    stall_timeout_s: float = 300.0
    # Stage I of one level in one process: killed past this, s (0 = no limit)
    stage1_timeout_s: float = 3600.0
    # a failed unit (a level's Stage I or Stage II) is retried in a fresh process this often
    retries: int = 2
    # slot working folders (work/slots/<slot>/), locks and the node's character cache
    work_dir: str = "work"
    # failure snapshots: <snapshot_dir>/<node>/<instance>/ (engine log, exit, reason, ...)
    snapshot_dir: str = "work/snapshots"
    # copy each level's pack into the slot before running it (§5.3); characters are copied
    # once into a node cache and symlinked into slots (§12)
    stage_assets: bool = True
    # live slot view: "auto" (a table on a terminal, plain lines otherwise), "plain", "off"
    display: str = "auto"
    # memory caps through cgroups (stages/cluster/cgroup_memory.py), GiB, 0 = none: all the
    # engines of this runner together, and each slot's engine; where cgroups allow, an engine
    # the kernel's OOM killer takes is host_oom (retried at fewer slots) either way
    memory_gb: float = 0.0
    slot_memory_gb: float = 0.0


@dataclass
class UploadConfig:
    """The per-node uploader (paper §8.3). Credentials come from the standard AWS chain
    (environment, shared files, instance profile) and are never part of the config."""

    # S3 endpoint (a custom one for SeaweedFS/MinIO); empty = AWS's own
    endpoint_url: str = "http://127.0.0.1:8333"
    # bucket, created when missing
    bucket: str = "wmforge"
    region: str = "us-east-1"
    # renders go to <prefix>/<scene>/<level>/<instance>/<traj>/<file>
    prefix: str = "renders"
    # failure snapshots go to <snapshot_prefix>/<node>/<instance>/<file>
    snapshot_prefix: str = "snapshots"
    # a finished trajectory is uploaded once its files have not changed for this long, s
    quiet_s: float = 10.0
    # files at least this large go up in parts of part_mb (S3's minimum part is 5 MiB)
    multipart_mb: int = 16
    part_mb: int = 8
    # seconds between scans; back-off after the store is unreachable doubles up to backoff_max_s
    poll_s: float = 2.0
    backoff_max_s: float = 60.0
    # an uploader process that died is started again after this long, doubling up to
    # backoff_max_s, s
    restart_backoff_s: float = 1.0
    # crashes in a row after which the uploader is poisoned (a crash it cannot get past: not
    # started again; `cluster health` needs a person)
    poison_after: int = 5
    # an uploader that ran this long before it crashed starts a new count of crashes in a row, s
    stable_s: float = 60.0
    # at the end of a run each node waits this long for its uploads, then lists what is still
    # local, why, and the command that delivers it, s
    end_wait_s: float = 600.0
    # check each object's size and SHA-256 with head_object before deleting the local file
    # (off only to measure what verification costs; then nothing local is deleted)
    verify: bool = True


@dataclass
class MonitorConfig:
    """Node monitors (paper §8.4), separate from the runners."""

    # the disk watched for pressure (empty: node.work_dir)
    disk_path: str = ""
    # free-space thresholds, MiB: warn; stop leasing (the allocator drains the node); prune
    # verified outputs and old logs. Each must be below the previous one's value.
    warn_free_mb: float = 20480.0
    drain_free_mb: float = 10240.0
    prune_free_mb: float = 5120.0
    # logs under node.work_dir older than this are pruned under pressure, h
    prune_log_age_h: float = 24.0
    # GPU probe: "nvml" (pynvml + an EGL device probe), or "standin:<json file>" (a stand-in
    # for NVML read from a file, named as such: tests on machines without a GPU)
    gpu_probe: str = "nvml"
    # remediation: reason code -> shell command run under a file lock with a per-node cooldown
    remediation: dict[str, str] = field(default_factory=dict)
    cooldown_s: float = 900.0
    # seconds between monitor rounds on each node
    interval_s: float = 30.0
    # `cluster health`: a finished trajectory still local (not delivered) after this long needs
    # a person, s
    backlog_alert_s: float = 1800.0


@dataclass
class UnrealConfig:
    """How a node runs Unreal Editor (config group ``unreal``). Execution settings only: they
    never change what a trajectory contains."""

    # UnrealEditor-Cmd of a UE 5.x Linux install (Engine/Binaries/Linux/UnrealEditor-Cmd)
    editor: str = ""
    # the render project (.uproject) with the Python, Movie Render Queue and Editor Scripting
    # plugins enabled; level packs are staged into its Content/ folder
    project: str = ""
    # the unprivileged user the node runner must run as (Unreal refuses root, §8.4)
    run_as: str = "wmforge"
    # a virtual X display per slot (Xvfb :display_base+k) instead of -RenderOffscreen
    virtual_display: bool = False
    display_base: int = 100
    # Stage I pawn: a Character Blueprint class path; empty = the native Character class
    pawn_class: str = ""
    # extra -ini overrides (Unreal's -ini:File:[Section]:Key=Value), e.g.
    # "Engine:[/Script/Engine.RendererSettings]:r.GenerateMeshDistanceFields=False"
    ini_overrides: list[str] = field(default_factory=list)
    # MRQ image sequence format: png (encoded by the node) or exr (kept, not encoded)
    image_format: str = "png"
    # MRQ engine warm-up frames at the start of each job, rendered and discarded, so Lumen,
    # virtual shadow maps and eye adaptation have settled by frame 0
    engine_warmup_frames: int = 32
    # texture residency before rendering (§7.2): texture pool, MB
    texture_pool_mb: int = 8192
    # a Stage II engine log past this many bytes is a failure (log_growth), bytes
    max_log_bytes: int = 512 * 1024 * 1024
    # after the stage script's completion marker, the editor may take this long to exit before
    # the launcher kills it (an editor that hangs or crashes on exit), s
    exit_grace_s: float = 60.0
