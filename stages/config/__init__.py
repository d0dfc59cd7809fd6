"""Structured configuration: one dataclass per stage, composed by Hydra from ``conf/``.

``conf/`` holds the values; ``params.yaml`` is its composed result (committed, rewritten by
``wmforge params``; DVC rewrites it itself on ``dvc exp run``). Every stage validates the part of
``params.yaml`` it reads against these dataclasses before any work, so a misspelt key or a wrong
type stops the run at start-up naming the key.

The schema is split by seam: ``assets`` (library, sample library, inventory), ``rendering``
(engine, Stage I trajectories, Stage II render), ``curation`` (screen, score, select),
``dataset`` (clips, caption, shard, report) and ``execution`` (cluster, node, upload, monitor,
unreal: how machines run the work); ``schema`` joins them into :class:`WmforgeConfig`,
``validation`` checks a config, ``loading`` composes ``conf/`` and reads ``params.yaml``.
Import from here: ``from stages.config import RenderConfig, load_params``.
"""

from .assets import InventoryConfig, LibraryConfig, SampleLibraryConfig
from .curation import ScoreConfig, ScreenConfig, SelectConfig
from .dataset import CaptionConfig, ClipsConfig, ReportConfig, ShardConfig, VLMConfig
from .execution import ClusterConfig, MonitorConfig, NodeConfig, UnrealConfig, UploadConfig
from .loading import (
    CONF_DIR,
    PARAMS_PATH,
    REPO_ROOT,
    SCHEMA_DEFAULTS_NAME,
    compose,
    composed_yaml,
    load_params,
    schema_defaults_yaml,
)
from .rendering import (
    RESOLUTION_PRESETS,
    EngineConfig,
    RenderConfig,
    RenderLimitsConfig,
    TrajectoriesConfig,
)
from .schema import WmforgeConfig, register_configs
from .validation import (
    ConfigError,
    validate,
    validate_cluster_settings,
    validate_node,
    validate_unreal,
)

__all__ = [
    "CONF_DIR", "PARAMS_PATH", "REPO_ROOT", "RESOLUTION_PRESETS", "SCHEMA_DEFAULTS_NAME",
    "CaptionConfig", "ClipsConfig", "ClusterConfig", "ConfigError", "EngineConfig",
    "InventoryConfig", "LibraryConfig", "MonitorConfig", "NodeConfig", "RenderConfig",
    "RenderLimitsConfig", "ReportConfig", "SampleLibraryConfig", "ScoreConfig", "ScreenConfig",
    "SelectConfig",
    "ShardConfig", "TrajectoriesConfig", "UnrealConfig", "UploadConfig", "VLMConfig",
    "WmforgeConfig", "compose", "composed_yaml", "load_params", "register_configs",
    "schema_defaults_yaml", "validate", "validate_cluster_settings", "validate_node",
    "validate_unreal",
]
