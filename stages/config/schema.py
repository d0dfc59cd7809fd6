"""The whole schema: one field per config group, registered with Hydra's ConfigStore."""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from .assets import InventoryConfig, LibraryConfig, SampleLibraryConfig
from .curation import ScoreConfig, ScreenConfig, SelectConfig
from .dataset import CaptionConfig, ClipsConfig, ReportConfig, ShardConfig
from .execution import ClusterConfig, MonitorConfig, NodeConfig, UnrealConfig, UploadConfig
from .rendering import EngineConfig, RenderConfig, TrajectoriesConfig


@dataclass
class WmforgeConfig:
    # the field order is the key order of conf/schema_defaults.yaml and so of params.yaml
    library: LibraryConfig = field(default_factory=LibraryConfig)
    sample_library: SampleLibraryConfig = field(default_factory=SampleLibraryConfig)
    inventory: InventoryConfig = field(default_factory=InventoryConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    trajectories: TrajectoriesConfig = field(default_factory=TrajectoriesConfig)
    screen: ScreenConfig = field(default_factory=ScreenConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    node: NodeConfig = field(default_factory=NodeConfig)
    upload: UploadConfig = field(default_factory=UploadConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    clips: ClipsConfig = field(default_factory=ClipsConfig)
    caption: CaptionConfig = field(default_factory=CaptionConfig)
    shard: ShardConfig = field(default_factory=ShardConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    unreal: UnrealConfig = field(default_factory=UnrealConfig)
    # global seed; every work unit derives its own seed from this and its id
    seed: int = 0


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (name ``wmforge_schema``)."""
    ConfigStore.instance().store(name="wmforge_schema", node=WmforgeConfig)


register_configs()
