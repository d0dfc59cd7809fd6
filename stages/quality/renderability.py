"""Renderability detectors (paper §4.2), as pure functions of per-frame measurements: each
returns a reason code when it trips. Load failures and empty levels come from the engine
(Stage I / Stage II failure rows); hovering and interpenetration from the recorded character
measured against the geometry a camera sees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LOAD_FAILURE = "load_failure"
NO_WALKABLE_REGION = "no_walkable_region"
HOVERING = "hovering"
INTERPENETRATION = "interpenetration"
# more triangles than render.limits.max_triangles (the inventory's count): never run
OVER_LIMIT = "over_limit"
REASONS = (LOAD_FAILURE, NO_WALKABLE_REGION, HOVERING, INTERPENETRATION, OVER_LIMIT)


@dataclass(frozen=True)
class DetectorThresholds:
    hover_airborne_share: float = 0.5  # walking frames out of ground contact
    hover_gap_m: float = 0.25  # capsule bottom above the visible ground straight below
    hover_gap_share: float = 0.3  # share of frames above the gap
    penetration_tol_m: float = 0.05  # capsule overlap with visible geometry
    penetration_share: float = 0.1  # share of frames overlapping


def clip_measurements(actions: Sequence[str], grounded: Sequence[bool],
                      gaps: Sequence[float | None], penetrations: Sequence[float],
                      th: DetectorThresholds) -> dict:
    """Per-clip figures from per-frame values (gap: feet height above the visible ground below,
    None where nothing visible is below)."""
    walking = [i for i, a in enumerate(actions) if a != "IDLE"]
    airborne = (sum(1 for i in walking if not grounded[i]) / len(walking)) if walking else 0.0
    known = [g for g in gaps if g is not None]
    n = max(1, len(gaps))
    gap_share = sum(1 for g in gaps if g is None or g > th.hover_gap_m) / n
    pen_share = sum(1 for p in penetrations if p > th.penetration_tol_m) / max(1,
                                                                              len(penetrations))
    return {"frames": len(actions), "airborne_walk_share": round(airborne, 4),
            "hover_gap_share": round(gap_share, 4),
            "median_gap_m": round(sorted(known)[len(known) // 2], 4) if known else None,
            "penetration_share": round(pen_share, 4),
            "max_penetration_m": round(max(penetrations, default=0.0), 4)}


def clip_reasons(m: dict, th: DetectorThresholds, walks: bool = True) -> list[str]:
    """The detectors a clip trips. Flyers and swimmers are off the ground by design: the
    hovering detector applies to walking characters only."""
    out = []
    if walks and (m["airborne_walk_share"] > th.hover_airborne_share
                  or m["hover_gap_share"] > th.hover_gap_share):
        out.append(HOVERING)
    if m["penetration_share"] > th.penetration_share:
        out.append(INTERPENETRATION)
    return out


def level_verdict(clip_reasons_: Sequence[Sequence[str]], engine_failures: Sequence[str],
                  reject_clip_share: float) -> tuple[str, list[str]]:
    """("pass" | "fail", reasons) for a level from its clips' reasons and the engine's failure
    reasons (load failures, no walkable region)."""
    reasons: list[str] = []
    for r in (LOAD_FAILURE, NO_WALKABLE_REGION):
        if r in engine_failures:
            reasons.append(r)
    for r in (HOVERING, INTERPENETRATION):
        hits = sum(1 for cr in clip_reasons_ if r in cr)
        if hits and hits / len(clip_reasons_) >= reject_clip_share:
            reasons.append(r)
    if not clip_reasons_ and not reasons:
        reasons.append(LOAD_FAILURE)  # nothing rendered at all
    return ("fail" if reasons else "pass"), reasons
