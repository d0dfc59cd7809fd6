"""Old path of :class:`stages.config.UnrealConfig` (stages/engine/unreal.py still imports it)."""
from .config import UnrealConfig, validate_unreal  # noqa: F401
