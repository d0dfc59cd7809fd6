"""The Sequencer and Movie Render Queue classes of the fake ``unreal`` module
(tests/fake_unreal.py re-exports them): what unreal/ue_sequence.py and unreal/stage2_mrq.py
call, recording what they set so the tests can read the sequence and the MRQ job back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fake_unreal_base import (
    Actor,
    AnimSequence,
    DirectoryPath,
    FrameNumber,
    FrameRate,
    IntPoint,
    Object,
    SoftObjectPath,
    _ed,
)

# ---------------------------------------------------------------- sequencer

class MovieSceneScriptingChannel(Object):
    pass


class MovieSceneScriptingDoubleChannel(MovieSceneScriptingChannel):
    def __init__(self, name: str):
        super().__init__(name)
        self.keys: dict[int, float] = {}
        self.interp: list[Any] = []

    def add_key(self, time: FrameNumber, new_value: float, sub_frame: float = 0.0,
                time_unit: Any = None, interpolation: Any = None) -> None:
        self.keys[time.value] = float(new_value)
        self.interp.append(interpolation)


class MovieSceneSection(Object):
    def __init__(self) -> None:
        super().__init__()
        self.range = (0, 0)

    def set_range(self, start_frame: int, end_frame: int) -> None:
        self.range = (start_frame, end_frame)


class MovieScene3DTransformSection(MovieSceneSection):
    NAMES = ("Location.X", "Location.Y", "Location.Z", "Rotation.X", "Rotation.Y",
             "Rotation.Z", "Scale.X", "Scale.Y", "Scale.Z")

    def __init__(self) -> None:
        super().__init__()
        self.channels = [MovieSceneScriptingDoubleChannel(n) for n in self.NAMES]

    def get_all_channels(self) -> list:
        return list(self.channels)


class MovieSceneSkeletalAnimationParams:
    def __init__(self) -> None:
        self.animation: AnimSequence | None = None


class MovieSceneSkeletalAnimationSection(MovieSceneSection):
    def __init__(self) -> None:
        super().__init__()
        self.params = MovieSceneSkeletalAnimationParams()


class MovieSceneCameraCutSection(MovieSceneSection):
    def __init__(self) -> None:
        super().__init__()
        self.camera: Any = None

    def set_camera_binding_id(self, camera_binding_id: Any) -> None:
        self.camera = camera_binding_id


class MovieSceneTrack(Object):
    SECTION: type = MovieSceneSection

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[MovieSceneSection] = []

    def add_section(self) -> MovieSceneSection:
        s = self.SECTION()
        self.sections.append(s)
        return s


class MovieScene3DTransformTrack(MovieSceneTrack):
    SECTION = MovieScene3DTransformSection


class MovieSceneSkeletalAnimationTrack(MovieSceneTrack):
    SECTION = MovieSceneSkeletalAnimationSection


class MovieSceneCameraCutTrack(MovieSceneTrack):
    SECTION = MovieSceneCameraCutSection


class MovieSceneBindingProxy(Object):
    def __init__(self, obj: Actor):
        super().__init__()
        self.object = obj
        self.tracks: list[MovieSceneTrack] = []

    def add_track(self, track_type: type) -> MovieSceneTrack:
        t = track_type()
        self.tracks.append(t)
        return t

    def transform(self) -> MovieScene3DTransformSection:
        return next(t for t in self.tracks if isinstance(t, MovieScene3DTransformTrack)
                    ).sections[0]  # type: ignore[return-value]


class LevelSequence(Object):
    def __init__(self, name: str, path: str):
        super().__init__(name)
        self._path = path
        self.display_rate = self.tick_resolution = FrameRate(0, 1)
        self.start = self.end = 0
        self.bindings: list[MovieSceneBindingProxy] = []
        self.tracks: list[MovieSceneTrack] = []

    def set_display_rate(self, display_rate: FrameRate) -> None:
        self.display_rate = display_rate

    def set_tick_resolution(self, tick_resolution: FrameRate) -> None:
        self.tick_resolution = tick_resolution

    def set_playback_start(self, start_frame: int) -> None:
        self.start = start_frame

    def set_playback_end(self, end_frame: int) -> None:
        self.end = end_frame

    def add_possessable(self, object_to_possess: Actor) -> MovieSceneBindingProxy:
        b = MovieSceneBindingProxy(object_to_possess)
        self.bindings.append(b)
        return b

    def add_track(self, track_type: type) -> MovieSceneTrack:
        t = track_type()
        self.tracks.append(t)
        return t

    def get_binding_id(self, binding: MovieSceneBindingProxy) -> MovieSceneBindingProxy:
        return binding


class LevelSequenceFactoryNew(Object):
    pass


class AssetTools(Object):
    def create_asset(self, asset_name: str, package_path: str, asset_class: type,
                     factory: Any, calling_context: str = "None") -> Object:
        path = f"{package_path}/{asset_name}.{asset_name}"
        ed = _ed()
        if path in ed.assets:
            raise RuntimeError(f"asset {path} already exists")
        seq = asset_class(asset_name, path)
        ed.assets[path] = ed.sequences[path] = seq
        return seq


class AssetToolsHelpers:
    @classmethod
    def get_asset_tools(cls) -> AssetTools:
        return AssetTools()


# ---------------------------------------------------------------- Movie Render Queue

class MoviePipeline(Object):
    pass


class MoviePipelineSetting(Object):
    pass


class MoviePipelineOutputSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.output_directory = DirectoryPath("")
        self.file_name_format = "{sequence_name}.{frame_number}"
        self.output_resolution = IntPoint(1920, 1080)
        self.zero_pad_frame_numbers = 4
        self.use_custom_frame_rate = False
        self.output_frame_rate = FrameRate(24, 1)
        self.override_existing_output = False
        self.flush_disk_writes_per_shot = False


class MoviePipelineAntiAliasingSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()  # MRQ's defaults (FACTS: Unreal)
        self.spatial_sample_count = 1
        self.temporal_sample_count = 1
        self.render_warm_up_count = 32
        self.engine_warm_up_count = 0
        self.use_camera_cut_for_warm_up = False
        self.render_warm_up_frames = False


class MoviePipelineCameraSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.render_all_cameras = False


class MoviePipelineDeferredPassBase(MoviePipelineSetting):
    pass


class MoviePipelineImageSequenceOutput_PNG(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineImageSequenceOutput_EXR(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineGameOverrideSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.flush_streaming_managers = False


class MoviePipelineConsoleVariableSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.cvars: dict[str, float] = {}

    def add_or_update_console_variable(self, name: str, value: float) -> bool:
        self.cvars[name] = float(value)
        return True


class MoviePipelinePrimaryConfig(Object):
    def __init__(self) -> None:
        super().__init__()
        self.settings: dict[type, MoviePipelineSetting] = {}

    def find_or_add_setting_by_class(self, class_: type) -> Any:
        if class_ not in self.settings:
            self.settings[class_] = class_()
        return self.settings[class_]


class MoviePipelineExecutorJob(Object):
    def __init__(self) -> None:
        super().__init__()
        self.job_name = ""
        self.map = SoftObjectPath()
        self.sequence = SoftObjectPath()
        self.config = MoviePipelinePrimaryConfig()

    def get_configuration(self) -> MoviePipelinePrimaryConfig:
        return self.config


class MoviePipelineQueue(Object):
    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[MoviePipelineExecutorJob] = []

    def allocate_new_job(self, job_type: type) -> MoviePipelineExecutorJob:
        j = job_type()
        self.jobs.append(j)
        return j

    def delete_all_jobs(self) -> None:
        self.jobs = []

    def get_jobs(self) -> list:
        return list(self.jobs)


class _Delegate:
    def __init__(self) -> None:
        self.fns: list[Callable] = []

    def add_callable(self, callable: Callable) -> None:
        self.fns.append(callable)

    def broadcast(self, *args: Any) -> None:
        for fn in self.fns:
            fn(*args)


class MoviePipelineExecutorBase(Object):
    def __init__(self) -> None:
        super().__init__()
        self.on_executor_finished_delegate = _Delegate()
        self.on_executor_errored_delegate = _Delegate()


class MoviePipelinePIEExecutor(MoviePipelineExecutorBase):
    def __init__(self) -> None:
        super().__init__()
        self.allow_unsaved = False

    def set_allow_using_unsaved_levels(self, should_allow: bool) -> None:
        self.allow_unsaved = should_allow
