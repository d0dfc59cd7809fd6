"""Five synchronized camera tracks computed after the motion is fixed (paper §6.3).

External views (back, left, right, top) sit at character-relative offsets scaled by the framing
height — the *visual* height, not the collision capsule (flat characters, §4.1) — and by the
level's rig scale (per-level override, or fitted to the free space the trajectory walks
through). Per frame, for each external view:

1. rays run from the look-at target toward the desired position, reporting *every* surface
   crossed. Occluders thinner than ``thin_occluder_m`` along the line of sight (poles, railings,
   branches) are looked past when the camera itself ends outside all geometry (an even number of
   crossings); anything else is solid.
2. When the line of sight is blocked, the boom swings along a short arc (around the character
   and upward, ``arc_step_deg`` steps up to ``arc_max_deg``) to the nearest spot with a clear
   view; the swing moves at a bounded rate, so the camera never jumps.
3. The distance contracts at once in front of a solid occluder (never a frame inside geometry)
   and expands slowly; it never comes closer than the character's capsule radius plus
   ``body_margin_m``: a frame that would need that is marked ``blocked`` (and occluded) instead
   of rendering the inside of the body.

Each row records the boom after occlusion, the configured distance for that view and level,
whether the view is *collapsed* (boom below ``collapse_ratio`` of the configured distance) and
the character's projected share of the image. The first-person camera sits at the eyes looking
forward; Stage II does not draw the character's own body in that view. Occlusion never feeds
back into the motion: this runs on a finished trajectory. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .projection import intrinsics, projected_share
from .rotations import Vec3, cross, look_rotation, unit
from .rotations import quat_from_columns as quat_from_columns  # unreal/ue_frame.py imports it here
from .trajectory import VIEWS


@dataclass
class CameraRigConfig:
    # output resolution of every view, px (intrinsics K derive from it and fov)
    width: int = 1280
    height: int = 720
    # horizontal field of view of the external views, deg
    fov_deg: float = 90.0
    # horizontal field of view of the first-person view, deg
    fp_fov_deg: float = 100.0
    # back view: distance behind and height above the feet, in framing heights, plus metres
    back_dist_h: float = 1.6
    back_dist_m: float = 1.2
    back_height_h: float = 0.9
    back_height_m: float = 0.4
    # side views: lateral distance, in framing heights plus metres
    side_dist_h: float = 1.4
    side_dist_m: float = 1.2
    side_height_h: float = 0.6
    # top view: height above the feet and distance behind
    top_height_h: float = 3.0
    top_height_m: float = 3.0
    top_back_m: float = 1.0
    # look-at target height, framing heights above the feet
    target_h: float = 0.6
    # first person: eye height, framing heights; pitch down, deg
    fp_eye_h: float = 0.92
    fp_pitch_deg: float = 8.0
    # distance kept in front of an occluder, m; closest allowed boom, m (never below the
    # character's capsule radius + body_margin_m: the camera does not enter the body)
    occlusion_margin_m: float = 0.2
    min_boom_m: float = 0.4
    body_margin_m: float = 0.25
    # occluders thinner than this along the line of sight, and narrower than narrow_width_m
    # across it (poles, branches; not walls or ceilings), are looked past when the camera itself
    # is outside all geometry, m
    thin_occluder_m: float = 0.35
    narrow_width_m: float = 0.5
    # blocked line of sight: swing the boom around the character / upward in steps of
    # arc_step_deg up to arc_max_deg, at most arc_rate_deg_s; 0 disables the swing
    arc_max_deg: float = 45.0
    arc_step_deg: float = 15.0
    arc_rate_deg_s: float = 120.0
    # a swing spot is clear when its free distance reaches this share of the configured one
    clear_ratio: float = 0.8
    # a view is collapsed in a frame when its boom is below this share of the configured
    # distance for that view and level
    collapse_ratio: float = 0.3
    # multiply the external views' distances (per-level rig: interiors use shorter rigs);
    # levels.parquet's camera_scale (overrides.yaml) replaces it for one level
    distance_scale: float = 1.0
    # fit each view's distance to the free space along it: the configured distance becomes
    # the median free distance over the trajectory when that is shorter (never below
    # fit_min_scale of the nominal distance)
    fit_to_space: bool = True
    fit_min_scale: float = 0.35
    # per-frame smoothing toward a shorter boom (1 = instant) and toward a longer one
    contract_alpha: float = 1.0
    expand_alpha: float = 0.06
    # smallest framing height used for offsets, m (a 6 cm bat is still framed)
    min_framing_m: float = 0.3


RaysFn = Callable[[Vec3, Vec3], list[float]]  # fractions of every surface crossing, sorted
EXTERNAL = ("back", "left", "right", "top")


def free_distance(hits: Sequence[float], full: float, rig: CameraRigConfig,
                  narrow: Callable[[], bool] | None = None) -> tuple[float, bool]:
    """(free distance along a line of sight of length ``full`` whose surface crossings are at
    ``hits`` (fractions), whether anything was crossed). Thin occluders are looked past when the
    end point is outside all geometry (an even number of crossings, each pair closer than
    ``thin_occluder_m``) and ``narrow()`` says they are narrow across the line of sight too —
    a pole or a branch, not a wall or a ceiling slab."""
    if not hits:
        return full, False
    d = [h * full for h in hits]
    if (len(d) % 2 == 0 and all(d[i + 1] - d[i] < rig.thin_occluder_m
                                for i in range(0, len(d), 2))
            and narrow is not None and narrow()):
        return full, True
    return max(d[0] - rig.occlusion_margin_m, 0.0), True


def _narrow_test(rays: RaysFn, a: Vec3, b: Vec3, width: float) -> bool:
    """True when the lines of sight shifted by ``width`` across a→b to both sides, or both up
    and down, are clear: the occluder on a→b is narrow in at least one direction across the
    line of sight (a pole, a branch, a railing), unlike a wall or a ceiling slab."""
    u = unit((b[0] - a[0], b[1] - a[1], b[2] - a[2]))
    side = cross(u, (0.0, 0.0, 1.0))
    if math.sqrt(sum(c * c for c in side)) < 1e-6:
        side = cross(u, (1.0, 0.0, 0.0))
    side = unit(side)
    up = unit(cross(side, u))
    for o in (side, up):
        clear = True
        for sgn in (1.0, -1.0):
            off = (o[0] * width * sgn, o[1] * width * sgn, o[2] * width * sgn)
            if rays((a[0] + off[0], a[1] + off[1], a[2] + off[2]),
                    (b[0] + off[0], b[1] + off[1], b[2] + off[2])):
                clear = False
                break
        if clear:
            return True
    return False


def _swings(rig: CameraRigConfig) -> list[tuple[float, float]]:
    """(azimuth, elevation) offsets, deg, in order of growing deviation: upward first."""
    if rig.arc_max_deg <= 0 or rig.arc_step_deg <= 0:
        return [(0.0, 0.0)]
    steps = int(rig.arc_max_deg // rig.arc_step_deg)
    out = [(0.0, 0.0)]
    for n in range(1, steps + 1):
        a = n * rig.arc_step_deg
        out += [(0.0, a), (a, 0.0), (-a, 0.0)]
        for m in range(1, n + 1):
            b = m * rig.arc_step_deg
            out += [(a, b), (-a, b)] if m <= n else []
    seen, uniq = set(), []
    for o in out:
        if o not in seen:
            seen.add(o)
            uniq.append(o)
    return uniq


def _swung(vec: Vec3, az_deg: float, el_deg: float) -> Vec3:
    """``vec`` turned by ``az_deg`` about +Z and raised by ``el_deg`` (capped at 85°)."""
    a = math.radians(az_deg)
    x, y = vec[0] * math.cos(a) - vec[1] * math.sin(a), vec[0] * math.sin(a) + vec[1] * math.cos(a)
    h = math.hypot(x, y)
    n = math.sqrt(h * h + vec[2] * vec[2])
    if el_deg == 0.0 or n < 1e-9 or h < 1e-9:
        return (x, y, vec[2])
    el = min(math.atan2(vec[2], h) + math.radians(el_deg), math.radians(85.0))
    return (x / h * n * math.cos(el), y / h * n * math.cos(el), n * math.sin(el))


def _offsets(hgt: float, rig: CameraRigConfig, scale: float) -> dict[str, Vec3]:
    """(forward, left, up) of each external view in the character frame, metres."""
    k = scale
    return {
        "back": (-(rig.back_dist_h * hgt + rig.back_dist_m) * k, 0.0,
                 (rig.back_height_h * hgt + rig.back_height_m) * k),
        "left": (0.0, (rig.side_dist_h * hgt + rig.side_dist_m) * k, rig.side_height_h * hgt),
        "right": (0.0, -(rig.side_dist_h * hgt + rig.side_dist_m) * k,
                  rig.side_height_h * hgt),
        "top": (-rig.top_back_m * k, 0.0, (rig.top_height_h * hgt + rig.top_height_m) * k),
    }


def _world(p: Vec3, yaw_deg: float, off: Vec3) -> Vec3:
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return (p[0] + off[0] * c - off[1] * s, p[1] + off[0] * s + off[1] * c, p[2] + off[2])


def body_exit(direction: Vec3, radius: float, height: float, target_z: float) -> float:
    """Distance from the look-at target (``target_z`` above the feet, on the body's axis) along
    ``direction`` to leave the character's body: a vertical cylinder of ``radius`` from the feet
    to ``height`` (the visual bounds, arms and tails included)."""
    u = unit(direction)
    h = math.hypot(u[0], u[1])
    t = radius / h if h > 1e-9 else math.inf
    if u[2] > 1e-9:
        t = min(t, (height - target_z) / u[2])
    elif u[2] < -1e-9:
        t = min(t, target_z / -u[2])
    return max(t, 0.0)


def fit_scales(positions: Sequence[Vec3], yaws_deg: Sequence[float], hgt: float,
               rig: CameraRigConfig, rays: RaysFn | None,
               floor: dict[str, float] | None = None) -> dict[str, float]:
    """Per external view, the share of its nominal distance that the free space along it
    allows over the trajectory (median of the per-frame free distance), in
    [max(fit_min_scale, floor[view]), 1]; 1 everywhere when fitting is off or there are no
    rays. ``floor`` keeps a fitted rig well outside a large character's body."""
    floor = floor or {}
    if rays is None or not rig.fit_to_space or not positions:
        return dict.fromkeys(EXTERNAL, 1.0)
    offs = _offsets(hgt, rig, rig.distance_scale)
    stride = max(1, len(positions) // 60)  # at most ~60 samples per trajectory
    out = {}
    for view in EXTERNAL:
        ratios = []
        for i in range(0, len(positions), stride):
            p = positions[i]
            target = (p[0], p[1], p[2] + rig.target_h * hgt)
            d = _world(p, yaws_deg[i], offs[view])
            full = math.dist(target, d)
            def narrow(t: Vec3 = target, e: Vec3 = d) -> bool:
                return _narrow_test(rays, t, e, rig.narrow_width_m)
            free, _ = free_distance(rays(target, d), full, rig, narrow)
            ratios.append(free / full if full > 1e-9 else 1.0)
        ratios.sort()
        med = ratios[len(ratios) // 2]
        out[view] = min(1.0, max(rig.fit_min_scale, floor.get(view, 0.0), med))
    return out


def compute_tracks(positions: Sequence[Vec3], yaws_deg: Sequence[float], visual_height: float,
                   rig: CameraRigConfig, rays: RaysFn | None, body_radius: float = 0.0,
                   fps: float = 30.0, body_width: float | None = None,
                   level_scale: float | None = None) -> list[dict]:
    """Rows of cameras.parquet (frame-major, views in VIEWS order).

    ``rays(a, b)`` returns the fractions of every surface crossing on the segment a→b (sorted);
    ``body_radius`` is the capsule radius the engine built, ``body_width`` the character's
    visual footprint (its largest horizontal extent, m); ``level_scale`` replaces
    ``rig.distance_scale`` for this level (overrides.yaml ``camera_scale``)."""
    hgt = max(visual_height, rig.min_framing_m)
    if level_scale is not None:
        rig = CameraRigConfig(**{**rig.__dict__, "distance_scale": float(level_scale)})
    nominal = _offsets(hgt, rig, rig.distance_scale)
    body_w = body_width if body_width is not None else max(2 * body_radius, 0.3 * hgt)
    # the camera stays outside the character's body: its capsule and its visual bounds (a
    # quadruped's length, a humanoid's arms), plus a margin, along each view's direction
    body_r = max(body_radius, body_w / 2)
    min_view = {v: max(rig.min_boom_m, body_radius + rig.body_margin_m,
                       body_exit((nominal[v][0], nominal[v][1],
                                  nominal[v][2] - rig.target_h * hgt), body_r, hgt,
                                 rig.target_h * hgt) + rig.body_margin_m)
                for v in EXTERNAL}
    lengths = {v: math.dist((0.0, 0.0, rig.target_h * hgt), nominal[v]) for v in EXTERNAL}
    fit = fit_scales(positions, yaws_deg, hgt, rig, rays,
                     {v: 1.5 * min_view[v] / lengths[v] for v in EXTERNAL if lengths[v] > 0})
    offsets = {v: (nominal[v][0] * fit[v], nominal[v][1] * fit[v],
                   nominal[v][2] * (fit[v] if v in ("back", "top") else 1.0))
               for v in EXTERNAL}
    swings = _swings(rig)
    max_step = rig.arc_rate_deg_s / max(fps, 1e-6)
    booms: dict[str, float] = {}
    swing_now: dict[str, tuple[float, float]] = dict.fromkeys(EXTERNAL, (0.0, 0.0))
    swing_goal: dict[str, tuple[float, float]] = dict.fromkeys(EXTERNAL, (0.0, 0.0))
    rows: list[dict] = []
    ext_k = intrinsics(rig.width, rig.height, rig.fov_deg)
    fp_k = intrinsics(rig.width, rig.height, rig.fp_fov_deg)
    for i, (p, yaw) in enumerate(zip(positions, yaws_deg, strict=True)):
        c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
        fwd = (c, s, 0.0)
        target = (p[0], p[1], p[2] + rig.target_h * hgt)
        for view in VIEWS:
            if view == "fp":
                eye = (p[0] + 0.1 * hgt * c, p[1] + 0.1 * hgt * s, p[2] + rig.fp_eye_h * hgt)
                pitch = math.radians(rig.fp_pitch_deg)
                look = (c * math.cos(pitch), s * math.cos(pitch), -math.sin(pitch))
                rows.append(_row(i, view, eye, look_rotation(look), rig, fp_k, rig.fp_fov_deg,
                                 0.0, 0.0, False, False, False, 0.0, (0.0, 0.0)))
                continue
            desired = _world(p, yaw, offsets[view])
            vec = (desired[0] - target[0], desired[1] - target[1], desired[2] - target[2])
            full = math.sqrt(sum(v * v for v in vec))

            def free_along(sw: tuple[float, float], vec=vec, full=full,
                           target=target) -> tuple[float, bool]:
                if rays is None:
                    return full, False
                v2 = _swung(vec, *sw)
                end = (target[0] + v2[0], target[1] + v2[1], target[2] + v2[2])
                return free_distance(rays(target, end), full, rig,
                                     lambda: _narrow_test(rays, target, end, rig.narrow_width_m))

            # choose where the boom should swing: nominal if clear, else keep a clear goal,
            # else the nearest clear spot along the arc (or the freest one)
            goal = swing_goal[view]
            f0, _ = free_along((0.0, 0.0))
            if f0 >= rig.clear_ratio * full:
                goal = (0.0, 0.0)
            elif goal == (0.0, 0.0) or free_along(goal)[0] < rig.clear_ratio * full:
                best, best_f = (0.0, 0.0), f0
                for sw in swings[1:]:
                    f, _ = free_along(sw)
                    if f >= rig.clear_ratio * full:
                        best, best_f = sw, f
                        break
                    if f > best_f + 0.05 * full:
                        best, best_f = sw, f
                goal = best
            swing_goal[view] = goal
            now = swing_now[view]
            if i == 0:  # a trajectory starts at its clear spot; after that the swing is rate-bound
                now = goal
            now = (now[0] + max(-max_step, min(max_step, goal[0] - now[0])),
                   now[1] + max(-max_step, min(max_step, goal[1] - now[1])))
            swing_now[view] = now
            free, occluded = free_along(now)
            allowed = min(free, full)
            min_boom = min_view[view]
            blocked = allowed < min_boom
            allowed = max(allowed, min_boom)
            prev = booms.get(view, allowed)
            alpha = rig.contract_alpha if allowed < prev else rig.expand_alpha
            boom = prev + (allowed - prev) * alpha
            boom = min(boom, allowed) if allowed < prev else boom
            booms[view] = boom
            u = unit(_swung(vec, *now))
            pos = (target[0] + u[0] * boom, target[1] + u[1] * boom, target[2] + u[2] * boom)
            look = (target[0] - pos[0], target[1] - pos[1], target[2] - pos[2])
            rot = look_rotation(look, fallback_up=fwd)
            share = projected_share(pos, rot, ext_k, rig.width, rig.height, p, hgt, body_w)
            rows.append(_row(i, view, pos, rot, rig, ext_k, rig.fov_deg, boom, full,
                             occluded or blocked, blocked,
                             boom < rig.collapse_ratio * full, share, now))
    return rows


def collapse_stats(rows: Sequence[dict]) -> dict[str, dict[str, float]]:
    """Per external view: the share of frames collapsed and blocked, the mean boom ratio and
    the mean projected share of the character (meta.json, shard JSON, dataset card)."""
    out: dict[str, dict[str, float]] = {}
    for view in EXTERNAL:
        rs = [r for r in rows if r["view"] == view]
        if not rs:
            continue
        n = len(rs)
        out[view] = {
            "collapsed_share": sum(1 for r in rs if r["collapsed"]) / n,
            "blocked_share": sum(1 for r in rs if r["blocked"]) / n,
            "boom_ratio_mean": sum(r["boom_m"] / r["boom_desired_m"] if r["boom_desired_m"]
                                   else 1.0 for r in rs) / n,
            "character_share_mean": sum(r["char_share"] for r in rs) / n,
            "configured_m": sum(r["boom_desired_m"] for r in rs) / n,
        }
    return out


def _row(frame: int, view: str, pos: Vec3, rot, rig: CameraRigConfig, k, fov: float,
         boom: float, desired: float, occluded: bool, blocked: bool, collapsed: bool,
         share: float, swing: tuple[float, float]) -> dict:
    return {"frame": frame, "view": view, "pos_x": pos[0], "pos_y": pos[1], "pos_z": pos[2],
            "rot_w": rot[0], "rot_x": rot[1], "rot_y": rot[2], "rot_z": rot[3], "fov_deg": fov,
            "width": rig.width, "height": rig.height, "fx": k[0], "fy": k[1], "cx": k[2],
            "cy": k[3], "boom_m": boom, "boom_desired_m": desired, "occluded": occluded,
            "blocked": blocked, "collapsed": collapsed, "char_share": share,
            "swing_az_deg": swing[0], "swing_el_deg": swing[1]}
