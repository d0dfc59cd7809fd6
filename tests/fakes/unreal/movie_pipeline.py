"""The Movie Render Queue classes of the fake ``unreal`` module: the job, its settings (MRQ's
own defaults), the queue and the executors with their delegates; what unreal/stage2_mrq.py
sets, recorded so the tests can read the job back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakes.unreal.objects import Declared, Object
from tests.fakes.unreal.structs import (
    DirectoryPath,
    FrameRate,
    IntPoint,
    SoftObjectPath,
    unreal_enum,
)


class MoviePipeline(Object):
    pass


class MoviePipelineSetting(Declared):
    """A setting: its class attributes are MRQ's defaults (FACTS: Unreal)."""


class MoviePipelineOutputSetting(MoviePipelineSetting):
    output_directory = DirectoryPath("")
    file_name_format = "{sequence_name}.{frame_number}"
    output_resolution = IntPoint(1920, 1080)
    zero_pad_frame_numbers = 4
    use_custom_frame_rate = False
    output_frame_rate = FrameRate(24, 1)
    override_existing_output = False
    flush_disk_writes_per_shot = False


class MoviePipelineAntiAliasingSetting(MoviePipelineSetting):
    spatial_sample_count = 1
    temporal_sample_count = 1
    render_warm_up_count = 32
    engine_warm_up_count = 0
    use_camera_cut_for_warm_up = False
    render_warm_up_frames = False
    override_anti_aliasing = False
    anti_aliasing_method: Any = None  # the project's (TSR in 5.x) unless overridden


class MoviePipelineCameraSetting(MoviePipelineSetting):
    render_all_cameras = False


class MoviePipelinePostProcessPass:
    """FMoviePipelinePostProcessPass (a struct)."""

    def __init__(self, enabled: bool = False, name: str = "", material: Any = None,
                 high_precision_output: bool = False):
        self.enabled, self.name, self.material = enabled, name, material
        self.high_precision_output = high_precision_output


# MRQ's constructor pre-seeds its own (disabled) post-process passes (MoviePipelineDeferredPasses)
DEFAULT_DEPTH = "/MovieRenderPipeline/Materials/MovieRenderQueue_WorldDepth"
DEFAULT_MOTION_VECTORS = "/MovieRenderPipeline/Materials/MovieRenderQueue_MotionVectors"


class MoviePipelineDeferredPassBase(MoviePipelineSetting):
    render_main_pass = True
    disable_multisample_effects = False
    additional_post_process_materials = [
        MoviePipelinePostProcessPass(False, "", DEFAULT_DEPTH, True),
        MoviePipelinePostProcessPass(False, "", DEFAULT_MOTION_VECTORS, False)]


MoviePipelineObjectIdPassIdType = unreal_enum("MoviePipelineObjectIdPassIdType", "FULL MATERIAL "
                                              "ACTOR ACTOR_WITH_HIERARCHY FOLDER LAYER")


class MoviePipelineObjectIdRenderPass(MoviePipelineSetting):
    id_type: Any = MoviePipelineObjectIdPassIdType.FULL
    include_translucent_objects = False


EXRCompressionFormat = unreal_enum("EXRCompressionFormat", "NONE PIZ ZIP DWAA DWAB")


class MoviePipelineImageSequenceOutput_PNG(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineImageSequenceOutput_EXR(MoviePipelineSetting):  # noqa: N801
    compression: Any = EXRCompressionFormat.PIZ
    multilayer = False


class MoviePipelineGameOverrideSetting(MoviePipelineSetting):
    flush_streaming_managers = False


class MoviePipelineConsoleVariableSetting(MoviePipelineSetting):
    cvars: dict[str, float] = {}

    def add_or_update_console_variable(self, name: str, value: float) -> bool:
        self.cvars[name] = float(value)
        return True


class MoviePipelinePrimaryConfig(Declared):
    settings: dict[type, MoviePipelineSetting] = {}

    def find_or_add_setting_by_class(self, class_: type) -> Any:
        if class_ not in self.settings:
            self.settings[class_] = class_()
        return self.settings[class_]


class MoviePipelineExecutorJob(Declared):
    job_name = ""
    map = SoftObjectPath()
    sequence = SoftObjectPath()

    def __init__(self) -> None:
        super().__init__()
        self.config = MoviePipelinePrimaryConfig()  # an Object: made with each job, not copied

    def get_configuration(self) -> MoviePipelinePrimaryConfig:
        return self.config


class MoviePipelineQueue(Declared):
    jobs: list[MoviePipelineExecutorJob] = []

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


class MoviePipelineExecutorBase(Declared):
    on_executor_finished_delegate = _Delegate()
    on_executor_errored_delegate = _Delegate()


class MoviePipelinePIEExecutor(MoviePipelineExecutorBase):
    allow_unsaved = False

    def set_allow_using_unsaved_levels(self, should_allow: bool) -> None:
        self.allow_unsaved = should_allow
