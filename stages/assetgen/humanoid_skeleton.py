"""The humanoid's 17-joint skeleton in the bind pose, scaled per character (height, build).

Authoring frame: Z up, metres, facing +X, origin between the feet on the ground. The bind pose
stands with straight legs and hanging arms; every joint's bind rotation is the identity, so a
joint's bind matrix is its translation.
"""

from __future__ import annotations

import numpy as np

# joint: (parent, bind position at s = 1, build = 1); l/r = +y / -y
_SKELETON: dict[str, tuple[str | None, tuple[float, float, float]]] = {
    "hips": (None, (0.0, 0.0, 0.95)),
    "spine": ("hips", (0.0, 0.0, 1.08)),
    "chest": ("spine", (0.0, 0.0, 1.28)),
    "neck": ("chest", (0.0, 0.0, 1.50)),
    "head": ("neck", (0.0, 0.0, 1.58)),
    "upper_arm_l": ("chest", (0.0, 0.20, 1.45)),
    "forearm_l": ("upper_arm_l", (0.0, 0.215, 1.16)),
    "hand_l": ("forearm_l", (0.0, 0.225, 0.90)),
    "upper_arm_r": ("chest", (0.0, -0.20, 1.45)),
    "forearm_r": ("upper_arm_r", (0.0, -0.215, 1.16)),
    "hand_r": ("forearm_r", (0.0, -0.225, 0.90)),
    "thigh_l": ("hips", (0.0, 0.09, 0.90)),
    "shin_l": ("thigh_l", (0.0, 0.09, 0.48)),
    "foot_l": ("shin_l", (0.0, 0.09, 0.08)),
    "thigh_r": ("hips", (0.0, -0.09, 0.90)),
    "shin_r": ("thigh_r", (0.0, -0.09, 0.48)),
    "foot_r": ("shin_r", (0.0, -0.09, 0.08)),
}
JOINTS = list(_SKELETON)
SIDES = (("l", 1.0), ("r", -1.0))


class Body:
    """Joint bind positions and limb lengths of one character (height, build)."""

    def __init__(self, height: float, build: float):
        self.s = s = height / 1.8
        self.build = build
        self.bind = {}
        for j, (_parent, (x, y, z)) in _SKELETON.items():
            wide = build if j.startswith(("upper_arm", "forearm", "hand", "thigh", "shin",
                                          "foot")) else 1.0
            self.bind[j] = np.array([x * s, y * s * wide, z * s])
        self.l1 = float(self.bind["thigh_l"][2] - self.bind["shin_l"][2])
        self.l2 = float(self.bind["shin_l"][2] - self.bind["foot_l"][2])
        self.ankle = float(self.bind["foot_l"][2])

    def parent(self, j: str) -> str | None:
        return _SKELETON[j][0]
