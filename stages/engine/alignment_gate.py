"""The alignment gate of one rendered trajectory (§7.2): the transforms placed in the scene graph
are the recorded ones, and each recorded position projects onto the rendered character mask."""

from __future__ import annotations

import math
from typing import Any

from ..core import replay
from ..core.trajectory import VIEWS

EXTERNAL = ("back", "left", "right", "top")


class AlignmentGate:
    """Fed one frame at a time (:meth:`check`), in any order; :meth:`result` is meta.json's
    ``alignment`` object."""

    def __init__(self, rows: list[dict], views: dict[str, list[dict]], width: int, height: int,
                 mask_scale: int, radius_px: float, visual_height_m: float, mesh_dz: float,
                 props_replayed: int):
        self.rows, self.views = rows, views
        self.W, self.H = width, height
        self.ms, self.rad = mask_scale, radius_px
        self.vh, self.dz = visual_height_m, mesh_dz
        self.props_replayed = props_replayed
        self.in_view = {v: 0 for v in EXTERNAL}
        self.aligned = {v: 0 for v in EXTERNAL}
        self.max_err = 0.0

    def check(self, f: int, placed: dict, masks: dict[str, Any],
              props: list | None = None) -> None:
        """Frame ``f``: ``placed`` as ``ReplayRenderer.placed`` returns it, ``masks`` the
        rendered character mask per view, ``props`` the recorded prop transforms."""
        rec = self.rows[f]
        pz = placed["character"]["pos"]
        # gate 1: the transforms in the scene graph are the recorded ones
        err = max(abs(pz[0] - rec["pos_x"]), abs(pz[1] - rec["pos_y"]),
                  abs(pz[2] - self.dz - rec["pos_z"]))
        for v in VIEWS:
            cr, pc = self.views[v][f], placed[v]
            err = max(err, abs(pc[0] - cr["pos_x"]), abs(pc[1] - cr["pos_y"]),
                      abs(pc[2] - cr["pos_z"]))
        if props is not None:
            for (pp, pq), (gp, gq) in zip(props, placed["props"], strict=True):
                err = max(err, *(abs(a - b) for a, b in zip(pp, gp, strict=True)),
                          min(max(abs(a - b) for a, b in zip(pq, gq, strict=True)),
                              max(abs(a + b) for a, b in zip(pq, gq, strict=True))))
        self.max_err = max(self.max_err, err)
        # gate 2: the recorded position projects onto the rendered character
        W, H, ms, rad = self.W, self.H, self.ms, self.rad
        target = (rec["pos_x"], rec["pos_y"], rec["pos_z"] + 0.5 * self.vh)
        for v in EXTERNAL:
            cr = self.views[v][f]
            fx = (W / 2) / math.tan(math.radians(cr["fov_deg"]) / 2)
            u, w_, d = replay.project(target, (cr["pos_x"], cr["pos_y"], cr["pos_z"]),
                                      (cr["rot_w"], cr["rot_x"], cr["rot_y"], cr["rot_z"]),
                                      fx, fx, W / 2, H / 2)
            if not (d > 0.05 and 0 <= u < W and 0 <= w_ < H):
                continue
            self.in_view[v] += 1
            m = masks[v]
            mu, mv = int(u / ms), int(w_ / ms)
            win = m[max(0, mv - rad): mv + rad + 1, max(0, mu - rad): mu + rad + 1]
            if win.any():
                self.aligned[v] += 1

    def result(self) -> dict:
        tot_in, tot_ok = sum(self.in_view.values()), sum(self.aligned.values())
        return {"in_view_frames": self.in_view, "aligned_frames": self.aligned,
                "props_replayed": self.props_replayed,
                "aligned_fraction": (tot_ok / tot_in) if tot_in else 1.0,
                "transform_max_err": self.max_err}
