"""What the fake editor renders for a Movie Render Queue render: each job's sequence, one output
frame per editor tick, every camera the job renders as a PNG named by the job's output setting.
A frame is a depth picture ray-cast into the embedded engine's level from the pose the
sequence's keys give at that frame (or the showcase pose of an auto-play sequence actor that
took the camera), not a shaded render. A crash mid-render is reproduced when the world asks
for one (``crash_after_jobs``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from tests.fakes.unreal import namespace as fu


class RenderHost(Protocol):
    """What a render reads and updates on the editor (``FakeEditor`` has all of it)."""

    engine: Any  # the embedded engine: the level the rays hit
    assets: dict[str, Any]  # the job's sequence, by path
    editor_world: Any  # its actors: an auto-play sequence actor takes every camera
    dirty: bool  # unsaved changes: the PIE executor refuses them unless allowed
    render: dict | None  # the render in progress (``start``); None when it is over
    rendered_jobs: int  # jobs this editor finished, over all its renders
    crash_after_jobs: int | None  # crash mid-render of the job after this many

    def write_log(self, category: str, verbosity: str, text: str) -> None: ...


def start(queue: fu.MoviePipelineQueue, executor: fu.MoviePipelineExecutorBase) -> dict:
    """The state of a render of ``queue``, before its first job."""
    return {"queue": queue, "executor": executor, "job": 0, "frame": None}


def tick(ed: RenderHost) -> None:
    """One editor frame of the render in progress (``ed.render``): the next output frame of the
    current job, the start or end of a job, or the end of the queue."""
    r = ed.render
    assert r is not None
    ex = r["executor"]
    jobs = r["queue"].jobs
    if r["job"] >= len(jobs):
        ed.write_log("LogMovieRenderPipeline", "", "MoviePipelineLinearExecutorBase "
                     f"finished {len(jobs)} jobs in +00:00:01.000.")
        ed.render = None
        ex.on_executor_finished_delegate.broadcast(ex, True)
        return
    job = jobs[r["job"]]
    if r["frame"] is None:
        ed.write_log("LogMovieRenderPipeline", "",
                     f"MoviePipelineLinearExecutorBase starting {len(jobs)} jobs.")
        if ed.dirty and not getattr(ex, "allow_unsaved", False):
            ex.on_executor_errored_delegate.broadcast(
                ex, fu.MoviePipeline(), True, fu.Text("the level has unsaved changes"))
            ed.render = None
            ex.on_executor_finished_delegate.broadcast(ex, False)
            return
        r["frame"] = 0
        r["seq"] = ed.assets[job.sequence.path]
    seq: fu.LevelSequence = r["seq"]
    k = r["frame"]
    if k >= seq.end:
        ed.write_log("LogMovieRenderPipeline", "", "Finished rendering last shot. "
                     "Moving to Finalize to finish writing items to disk.")
        ed.rendered_jobs += 1
        r["job"] += 1
        r["frame"] = None
        return
    if (ed.crash_after_jobs is not None and ed.rendered_jobs >= ed.crash_after_jobs
            and k == 5):  # mid-render of the next job
        ed.write_log("LogCore", "Error: ", "Caught signal 11 Segmentation fault")
        raise fu.FakeCrash("signal 11 during MRQ")
    _render_frame(ed, job, seq, k)
    r["frame"] = k + 1


def _render_frame(ed: RenderHost, job: fu.MoviePipelineExecutorJob,
                  seq: fu.LevelSequence, k: int) -> None:
    """Frame ``k`` of ``seq``: one PNG per rendered camera, named as MRQ's output setting says."""
    import numpy as np
    from PIL import Image

    cfg = job.config.settings
    out: fu.MoviePipelineOutputSetting = cfg[fu.MoviePipelineOutputSetting]
    cams = cfg.get(fu.MoviePipelineCameraSetting)
    cut = next(t for t in seq.tracks if isinstance(t, fu.MovieSceneCameraCutTrack))
    primary = cut.sections[0].camera  # type: ignore[attr-defined]
    bindings = [b for b in seq.bindings if isinstance(b.object, fu.CineCameraActor)]
    if not (cams and cams.render_all_cameras):
        bindings = [primary]
    W, H = out.output_resolution.x, out.output_resolution.y
    takeover = next((a for a in ed.editor_world.actors if isinstance(a, fu.LevelSequenceActor)
                     and a.playback_settings.auto_play), None)
    for b in bindings:
        if takeover is not None:  # the level's own sequence owns the camera now
            loc, rot = takeover.showcase
        else:
            ch = {c.get_name(): c.keys for c in b.transform().channels}
            loc = fu.Vector(ch["Location.X"][k], ch["Location.Y"][k], ch["Location.Z"][k])
            rot = fu.Rotator(ch["Rotation.X"][k], ch["Rotation.Y"][k], ch["Rotation.Z"][k])
        cc = b.object.get_cine_camera_component()
        hfov = 2 * math.atan(cc.filmback.sensor_width / (2 * cc.current_focal_length))
        img = depth_picture(ed.engine, loc, rot, hfov, W, H)
        name = out.file_name_format.replace("{camera_name}", b.object.label).replace(
            "{frame_number}", f"{k:0{out.zero_pad_frame_numbers}d}")
        path = Path(out.output_directory.path) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.ascontiguousarray(img)).save(path)


def depth_picture(engine: Any, loc: fu.Vector, rot: fu.Rotator, hfov: float, W: int,
                  H: int) -> Any:
    """Rays from ``loc`` into the level (one per 2x2 pixels): nearer is brighter, a 1 m checker
    on the hits, the normal tinting green and blue. A depth picture, not a shaded render."""
    import numpy as np

    f, rt, up = fu.camera_basis(rot)
    o = fu._m(loc)
    th, tv = math.tan(hfov / 2), math.tan(hfov / 2) * H / W
    img = np.zeros((H, W, 3), np.uint8)
    step = 2  # one ray per 2x2 pixels
    for j in range(0, H, step):
        v = 1 - 2 * (j + 0.5) / H
        for i in range(0, W, step):
            u = 2 * (i + 0.5) / W - 1
            d = tuple(f[a] + u * th * rt[a] + v * tv * up[a] for a in range(3))
            end = tuple(o[a] + 60.0 * d[a] for a in range(3))
            hit = engine.raycast(o, end)
            g = 0 if hit is None else int(255 * (1 - hit.fraction))
            if hit is not None:  # a 1 m checker "texture" so a moving camera sees motion
                g = int(g * (0.7 + 0.3 * ((math.floor(hit.position[0]) +
                                            math.floor(hit.position[1])) % 2)))
            n = (0.0, 0.0, 1.0) if hit is None else hit.normal
            img[j:j + step, i:i + step] = (g, int(g * (0.5 + 0.5 * abs(n[2]))),
                                           int(g * (0.5 + 0.5 * abs(n[0]))))
    return img
