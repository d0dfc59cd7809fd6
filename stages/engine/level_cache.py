"""The one level an embedded Stage II renderer holds (paper §7): which level it is (its key:
the node's content digest of the level's folder, its scale and up axis), its checks before a
load (asset guard, render.limits), the load itself with its lighting and warm-up, and the
report every trajectory of it records in its meta.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.asset_guard import AssetInputError, check_model_file
from .render_settings import RenderSettings
from .replay_inputs import _Fail, _level_up_axis, _resolve, file_stamp


class LevelCache:
    """Loads a trajectory's level into the renderer unless it holds it already."""

    def __init__(self, settings: RenderSettings, base: Path, path_map: dict[str, str],
                 level_digests: dict[str, str] | None, log: Callable[..., Any]):
        self.s, self.base, self.path_map, self.log = settings, base, path_map, log
        # the node's content digest of each level's folder by its recorded path (without
        # one, a spec written by hand say, a level is known by its file's size and mtime)
        self.digests = dict(level_digests or {})
        self.key: str | None = None
        self.report: dict = {}
        # (level key, detail) of a level found over render.limits.max_triangles: its later
        # trajectories fail at once instead of loading it again (the detail only: a kept
        # exception's traceback would keep the loaded level alive)
        self._over_limit: tuple[str, str] | None = None

    def ensure(self, meta: dict, renderer: Callable[[], Any], beat: Callable[[float], None]
               ) -> None:
        """The level of ``meta`` (a trajectory's meta.json) loaded into ``renderer()``, its
        exposure compensation set. Raises :class:`_Fail` (missing_asset, bad_asset) or
        ``SceneOverLimit``."""
        from .level_render import load_level_lighting

        lv = meta.get("level") or {}
        path = _resolve(str(lv.get("path", "")), self.base, self.path_map)
        ev = float(lv.get("exposure_compensation") or 0.0)  # per-level override, stops
        up = _level_up_axis(meta, path)
        stamp = self.digests.get(str(lv.get("path", ""))) or file_stamp(path)
        key = f"{path}@{stamp}|{lv.get('scale', 1.0)}|{up}"  # replaced in place: another
        renderer().set_exposure(ev)
        # the same report whether or not this renderer loaded the level for this trajectory
        # (render order must never change a meta.json)
        self.report["exposure_compensation"] = ev
        if key == self.key:
            return
        from .scene_limits import SceneOverLimit, apply_limits, check_file

        if self._over_limit is not None and self._over_limit[0] == key:
            raise SceneOverLimit(self._over_limit[1])
        if not path.is_file():
            raise _Fail("missing_asset", f"level file {path} (meta.json level.path) not found")
        r = renderer()
        try:
            check_model_file(path, self.pack_root(path))
        except (AssetInputError, OSError) as exc:
            raise _Fail("bad_asset", f"{path}: {exc}") from None
        try:
            check_file(path, self.s.max_triangles)
            try:
                from .models import load_model

                model = load_model(str(path), float(lv.get("scale", 1.0)), up)
            except Exception as exc:  # noqa: BLE001 - any loader failure is a reason
                raise _Fail("missing_asset", f"{path}: {exc}") from None
            model.flattenLight()
            cap = 0 if r.gsg is None else int(r.gsg.getMaxTextureDimension())  # GL's; compute: none
            limits = apply_limits(model, path, self.s.max_triangles, self.s.max_texture_px, cap,
                                  self.log)
        except SceneOverLimit as exc:
            self._over_limit = (key, exc.detail)
            raise
        lighting = load_level_lighting(str(path))
        rep = r.load_level(model, lighting, source=str(lv.get("path", "")), stamp=stamp)
        known = "content" if self.digests.get(str(lv.get("path", ""))) else "size:mtime"
        self.log(f"render: level {lv.get('path', '')} loaded, known by its {known} @ {stamp}")
        beat(0.0)
        r.warmup(self.s.warmup_frames)
        beat(0.0)
        self.report = {"removed": rep.removed, "textures": rep.textures,
                       "textures_full_res": rep.textures_full_res, **limits,
                       "lights": rep.lights,
                       "dynamic_props": rep.props,
                       "warmup_frames": self.s.warmup_frames,
                       "lighting": lighting.get("preset") or lighting.get("lighting"),
                       "exposure_compensation": ev}
        self.key = key

    def pack_root(self, path: Path) -> Path:
        """The staged (or library) pack a level file lies in: its references stay inside."""
        for src, dst in self.path_map.items():
            for d in (dst, src):
                if Path(d) in path.parents:
                    return Path(d)
        return path.parent
