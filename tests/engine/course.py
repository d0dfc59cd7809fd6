"""A behaviour test course for the character controller, written as a real .glb."""

from pathlib import Path

from stages.assetgen.levels import LevelBuilder
from stages.assetgen.primitives import box, ramp, stairs

# Each feature sits in its own lane along +x so runs do not interfere.
RAMP20 = (0.0, -20.0)  # ramp starts at x=0 in lane y=-20, rises along +x
RAMP50 = (0.0, -10.0)
STAIRS = (0.0, 0.0)  # 10 steps of 0.2 m x 0.35 m, then a landing
WALL_X = 6.0  # a wall across lane y=10 at x=6
LEDGE = (0.0, 20.0)  # 3 m high platform from x=-10..0 in lane y=20; drop off at x=0
CRATE = (4.0, 30.0)  # a 0.8 m crate, mass 20


def build_course(path: Path) -> Path:
    b = LevelBuilder("Course", "day", 16, 0)
    b.part("Ground", box(80, 80, 0.5, 2.0, center=(0, 0, -0.5)), "concrete")
    b.part("Ramp20", ramp(8.0, 3.0, 20.0, 1.0, (RAMP20[0], RAMP20[1], 0)), "concrete")
    b.part("Ramp20_top", box(6, 3, 8.0 * 0.36397, 1.0, (11.0, RAMP20[1], 0)), "concrete")
    b.part("Ramp50", ramp(4.0, 3.0, 50.0, 1.0, (RAMP50[0], RAMP50[1], 0)), "concrete")
    b.part("Stairs", stairs(10, 0.2, 0.35, 3.0, 1.0, (STAIRS[0], STAIRS[1], 0)), "concrete")
    b.part("Stairs_top", box(4, 3, 2.0, 1.0, (3.5 + 2.0, STAIRS[1], 0)), "concrete")
    b.part("Wall", box(0.4, 6.0, 3.0, 1.0, (WALL_X + 0.2, 10.0, 0)), "brick")
    b.part("Ledge", box(10, 4, 3.0, 1.0, (LEDGE[0] - 5.0, LEDGE[1], 0)), "stone")
    b.prop("Crate", (0.8, 0.8, 0.8), "wood", (CRATE[0], CRATE[1], 0.0), 20.0)
    b.marker("player_start", "PlayerStart_0", (-20, 0, 0.5), 0)
    b.lights()
    path.write_bytes(b.to_glb())
    return path
