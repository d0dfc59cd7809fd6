"""The lighting pass's uniforms (``Lighting``): the lights in priority order, the sun's shadow,
the sky and its SH irradiance, as the GL pass (``deferred.LightingPass``) sets them, built from
plain values or from the same Panda3D light NodePaths; on the device through pinned copies."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from ..pbr import MAX_LIGHTS, sh9, sky_settings
from .upload import upload


@dataclass(frozen=True)
class Lighting:
    """The lighting pass's uniforms as float32 tensors (world space, MAX_LIGHTS slots each)."""

    light_vec: torch.Tensor    # [L, 4]: w 0: direction toward the light; w 1: its position
    light_color: torch.Tensor  # [L, 3]
    light_att: torch.Tensor    # [L, 3]: constant, linear, quadratic
    light_spot: torch.Tensor   # [L, 4]: spot direction, cos cutoff (0: not a spot)
    light_range: torch.Tensor  # [L]: glTF range, m (0: unbounded)
    num_lights: int
    shadow_light: int          # index of the shadow-casting sun (-1: none)
    ibl_strength: float
    sky_strength: float
    sky_zenith: torch.Tensor   # [3] linear radiance
    sky_horizon: torch.Tensor  # [3]
    sky_ground: torch.Tensor   # [3]
    sun_dir_world: torch.Tensor  # [3] direction the sunlight travels (unit)
    sun_radiance: torch.Tensor   # [3] the sun disc's colour in the sky
    sh_coeffs: torch.Tensor      # [9, 3] the sky's irradiance SH
    # per light, as plain numbers (the pass's branches, taken without reading the device, and
    # constants to torch.compile): (lit at all, positional, range, spot cos cutoff)
    light_flags: tuple[tuple[bool, bool, float, float], ...] = ()

    def to(self, device: Any) -> Lighting:
        """The same uniforms on ``device`` (copied without stalling the host)."""
        dev = torch.device(device)
        moved: dict[str, Any] = {f.name: upload(getattr(self, f.name), dev) for f in fields(self)
                                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **moved)


def _t(x: Any, shape: tuple[int, ...]) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float32).reshape(shape)
    return t.clone()


def make_lighting(lights: list[dict], sky: dict, *, shadow_light: int, ibl_strength: float,
                  sky_strength: float = 1.0) -> Lighting:
    """Uniforms from plain values: ``lights`` in priority order, each a dict with ``vec``
    (4), ``color`` (3) and optionally ``att`` (3), ``spot`` (4), ``range``; ``sky`` as
    :func:`stages.engine.pbr.sky_settings` returns it (its SH computed here, as the GL path
    does)."""
    if len(lights) > MAX_LIGHTS:
        raise ValueError(f"compute shade: {len(lights)} lights; the pass reads at most "
                         f"{MAX_LIGHTS} (pass them in priority order, truncated)")
    vec = [[0.0, 0.0, 0.0, 0.0] for _ in range(MAX_LIGHTS)]
    col = [[0.0, 0.0, 0.0] for _ in range(MAX_LIGHTS)]
    att = [[1.0, 0.0, 0.0] for _ in range(MAX_LIGHTS)]
    spot = [[0.0, 0.0, 0.0, 0.0] for _ in range(MAX_LIGHTS)]
    rng = [0.0] * MAX_LIGHTS
    for i, ln in enumerate(lights):
        vec[i] = [float(x) for x in ln["vec"]]
        col[i] = [float(x) for x in ln["color"]]
        att[i] = [float(x) for x in ln.get("att", (1.0, 0.0, 0.0))]
        spot[i] = [float(x) for x in ln.get("spot", (0.0, 0.0, 0.0, 0.0))]
        rng[i] = float(ln.get("range", 0.0))
    for k in ("zenith", "horizon", "ground", "sun_dir", "sun_radiance"):
        if k not in sky:
            raise ValueError(f"compute shade: sky settings lack {k!r} (expected "
                             "stages.engine.pbr.sky_settings' dict)")
    return Lighting(
        light_vec=_t(vec, (MAX_LIGHTS, 4)), light_color=_t(col, (MAX_LIGHTS, 3)),
        light_att=_t(att, (MAX_LIGHTS, 3)), light_spot=_t(spot, (MAX_LIGHTS, 4)),
        light_range=_t(rng, (MAX_LIGHTS,)), num_lights=len(lights),
        shadow_light=int(shadow_light), ibl_strength=float(ibl_strength),
        sky_strength=float(sky_strength), sky_zenith=_t(sky["zenith"], (3,)),
        sky_horizon=_t(sky["horizon"], (3,)), sky_ground=_t(sky["ground"], (3,)),
        sun_dir_world=_t(sky["sun_dir"], (3,)), sun_radiance=_t(sky["sun_radiance"], (3,)),
        sh_coeffs=_t(sh9(sky), (9, 3)),
        light_flags=tuple((sum(c * c for c in col[i]) >= 1e-6, vec[i][3] != 0.0, rng[i],
                           spot[i][3]) for i in range(len(lights))))


def light_inputs(lights: list[Any], scene: Any, ranges: list[float]) -> list[dict]:
    """The lights as :func:`make_lighting` takes them, from the same Panda3D light NodePaths
    and ranges the GL pass reads (``deferred.light_inputs``, whose values these are)."""
    from ..deferred import light_inputs as gl_inputs

    u = gl_inputs(lights, scene, ranges)
    return [{"vec": tuple(u["light_vec"][i]), "color": tuple(u["light_color"][i]),
             "att": tuple(u["light_att"][i]), "spot": tuple(u["light_spot"][i]),
             "range": float(u["light_range"][i])} for i in range(int(u["num_lights"]))]


def lighting_from_pass(lighting_pass: Any, level_lighting: dict | None, *,
                       shadow_light: int = 0) -> Lighting:
    """The uniforms a :class:`stages.engine.deferred.LightingPass` holds, for the level lit by
    ``level_lighting`` (its glTF preset; the sky follows it as ``LevelScene._set_sky`` does).
    ``shadow_light`` is 0 once a level is loaded (the sun), -1 before. Lights are read where
    they are now: where one moves with a prop (``lighting_pass.lights_move``), build this
    every frame, as the GL pass refreshes its uniforms."""
    r = lighting_pass.r
    return make_lighting(light_inputs(lighting_pass.lights, r.scene, lighting_pass.ranges),
                         sky_settings(level_lighting or {}), shadow_light=shadow_light,
                         ibl_strength=float(r.look.ibl_strength))


# ---------------------------------------------------------------- the GL pass's place


class LightsRecord:
    """Stands where ``level_render`` hands the GL deferred pass its lights (``set_lights``) and
    inputs: it keeps the lights and ranges, which the compute lighting reads every frame."""

    def __init__(self) -> None:
        self.lights: list[Any] = []
        self.ranges: list[float] = []

    def set_input(self, name: str, value: Any) -> None:
        del name, value  # the compute pass reads the level's settings itself

    def set_lights(self, lights: list[Any], ranges: list[float], pivots: list[Any]) -> None:
        self.lights, self.ranges = list(lights), list(ranges)
        del pivots  # positions are read every frame (lights under pushed props move)

    def before_frame(self) -> None:
        pass


__all__ = ["Lighting", "LightsRecord", "light_inputs", "lighting_from_pass", "make_lighting"]
