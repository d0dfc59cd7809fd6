"""What the fake editor renders for a Movie Render Queue render: each job's sequence, one output
frame per editor tick, every camera the job renders as a PNG named by the job's output setting.
A frame is a depth picture ray-cast into the embedded engine's level from the pose the
sequence's keys give at that frame (or the showcase pose of an auto-play sequence actor that
took the camera), not a shaded render; skeletal mesh actors drawn in the main pass show as
magenta cylinders (their mesh's size, standing on the actor's origin), so a character that
floats, or a first-person camera inside the body, shows in the pictures.

As MRQ does, all cameras of a job are rendered from one world state per sample: the sequence
is evaluated (every binding's transform track, interpolated between keys) at each temporal
sample of a frame, ``frame + s / temporal_sample_count``, and applied to the bound actors —
for a SkeletalMeshActor that is its root component, the skeletal mesh component itself. What
each sample saw is appended to ``world_states``. A crash mid-render is reproduced when the
world asks for one (``crash_after_jobs``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from tests.fakes.unreal import mrq_layers
from tests.fakes.unreal import namespace as fu
from tests.fakes.unreal.mrq_layers import _ray_body


class RenderHost(Protocol):
    """What a render reads and updates on the editor (``FakeEditor`` has all of it)."""

    engine: Any  # the embedded engine: the level the rays hit
    assets: dict[str, Any]  # the job's sequence, by path
    editor_world: Any  # its actors: an auto-play sequence actor takes every camera
    dirty: bool  # unsaved changes: the PIE executor refuses them unless allowed
    render: dict | None  # the render in progress (``start``); None when it is over
    world_states: list[dict]  # what each sample and picture saw
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
    aa = job.config.settings.get(fu.MoviePipelineAntiAliasingSetting)
    samples = max(1, int(aa.temporal_sample_count)) if aa is not None else 1
    for sub in range(samples):  # every temporal sample's world state is recorded ...
        _apply_sequence(ed, job, seq, k, sub, samples)
    _apply_sequence(ed, job, seq, k, 0, samples, record=False)  # ... the picture is sample 0
    _render_frame(ed, job, seq, k)
    r["frame"] = k + 1


def _apply_sequence(ed: RenderHost, job: fu.MoviePipelineExecutorJob, seq: fu.LevelSequence,
                    k: int, sub: int, samples: int, record: bool = True) -> None:
    """Evaluate every binding's transform at ``k + sub / samples`` and set it on the bound
    actor (its root component: a track overwrites what was set there before)."""
    t = k + sub / samples
    chars, cams = [], {}
    for b in seq.bindings:
        ev = b.evaluate(t)
        if ev is None:
            continue
        loc, rot, scale = ev
        a = b.object
        a.location = fu.Vector(*loc)
        a.rotation = fu.Rotator(*rot)
        if a.root_component is not None:
            a.root_component.relative_scale = fu.Vector(*scale)
        if isinstance(a, fu.SkeletalMeshActor):
            c = a.skeletal_mesh_component
            low = fu._m(a.location)
            if c.asset is not None:  # the drawn body's lowest point
                low = (low[0], low[1], low[2] + c.asset.base_cm * abs(c.relative_scale.z) / 100)
            chars.append({"feet": fu._m(a.location), "lowest": low, "yaw_ue": a.rotation.yaw,
                          "roll_ue": a.rotation.roll, "pitch_ue": a.rotation.pitch,
                          "main_pass": bool(c.render_in_main_pass and not a.hidden_in_game)})
        elif isinstance(a, fu.CineCameraActor):
            cams[a.label] = (a.rotation.roll, a.rotation.pitch, a.rotation.yaw)
    if record:
        ed.world_states.append({"kind": "sample", "job": job.job_name, "frame": k, "sub": sub,
                                "t": t, "characters": chars, "cameras": cams})


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
    bodies = [_body(a) for a in ed.editor_world.actors if isinstance(a, fu.SkeletalMeshActor)
              and a.skeletal_mesh_component.asset is not None
              and a.skeletal_mesh_component.render_in_main_pass and not a.hidden_in_game]
    for b in bindings:
        if takeover is not None:  # the level's own sequence owns the camera now
            loc, rot = takeover.showcase
        else:
            loc, rot = b.object.location, b.object.rotation
        cc = b.object.get_cine_camera_component()
        hfov = 2 * math.atan(cc.filmback.sensor_width / (2 * cc.current_focal_length))
        if mrq_layers.has_layer_passes(job):  # EXR passes of a ground-truth job
            mrq_layers.write_frame(ed, job, b.object.label, loc, rot, hfov, W, H, k)
            continue
        img, n_body = depth_picture(ed.engine, loc, rot, hfov, W, H, bodies)
        ed.world_states.append({"kind": "picture", "job": job.job_name, "frame": k,
                                "camera": b.object.label, "character_pixels": n_body,
                                "pixels": W * H})
        name = out.file_name_format.replace("{camera_name}", b.object.label).replace(
            "{frame_number}", f"{k:0{out.zero_pad_frame_numbers}d}")
        path = Path(out.output_directory.path) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.ascontiguousarray(img)).save(path)


def _body(a: fu.SkeletalMeshActor) -> tuple[float, float, float, float, float]:
    """(x, y, z of its lowest point, radius, height), metres, of a drawn skeletal mesh actor:
    its mesh stands ``base_cm`` (scaled) above the root component's origin."""
    c = a.skeletal_mesh_component
    mesh = c.asset
    assert mesh is not None
    x, y, z = fu._m(c.relative_location)
    return (x, y, z + mesh.base_cm * abs(c.relative_scale.z) / 100.0,
            mesh.radius_cm * abs(c.relative_scale.x) / 100.0,
            mesh.height_cm * abs(c.relative_scale.z) / 100.0)


def depth_picture(engine: Any, loc: fu.Vector, rot: fu.Rotator, hfov: float, W: int,
                  H: int, bodies: list | None = None) -> tuple[Any, int]:
    """Rays from ``loc`` into the level (one per 2x2 pixels): nearer is brighter, a 1 m checker
    on the hits, the normal tinting green and blue; a body nearer than the level is magenta.
    A depth picture, not a shaded render. Returns (picture, pixels showing a body)."""
    import numpy as np

    f, rt, up = fu.camera_basis(rot)
    o = fu._m(loc)
    th, tv = math.tan(hfov / 2), math.tan(hfov / 2) * H / W
    img = np.zeros((H, W, 3), np.uint8)
    step = 2  # one ray per 2x2 pixels
    n_body = 0
    for j in range(0, H, step):
        v = 1 - 2 * (j + 0.5) / H
        for i in range(0, W, step):
            u = 2 * (i + 0.5) / W - 1
            d = tuple(f[a] + u * th * rt[a] + v * tv * up[a] for a in range(3))
            end = tuple(o[a] + 60.0 * d[a] for a in range(3))
            hit = engine.raycast(o, end)
            tb = min((t for t in (_ray_body(o, d, bd) for bd in bodies or ()) if t is not None),
                     default=None)
            if tb is not None and (hit is None or tb < hit.fraction * 60.0):
                img[j:j + step, i:i + step] = (255, 0, 255)
                n_body += min(step, H - j) * min(step, W - i)
                continue
            g = 0 if hit is None else int(255 * (1 - hit.fraction))
            if hit is not None:  # a 1 m checker "texture" so a moving camera sees motion
                g = int(g * (0.7 + 0.3 * ((math.floor(hit.position[0]) +
                                            math.floor(hit.position[1])) % 2)))
            n = (0.0, 0.0, 1.0) if hit is None else hit.normal
            img[j:j + step, i:i + step] = (g, int(g * (0.5 + 0.5 * abs(n[2]))),
                                           int(g * (0.5 + 0.5 * abs(n[0]))))
    return img, n_body
