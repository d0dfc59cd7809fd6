"""The Movie Render Queue classes of the fake ``unreal`` module: the job, its settings (MRQ's
own defaults), the queue and the executors with their delegates; what unreal/stage2_mrq.py
sets, recorded so the tests can read the job back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakes.unreal.objects import Object
from tests.fakes.unreal.structs import (
    DirectoryPath,
    FrameRate,
    IntPoint,
    SoftObjectPath,
    _Enum,
)


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
        self.override_anti_aliasing = False
        self.anti_aliasing_method: Any = None  # the project's (TSR in 5.x) unless overridden


class MoviePipelineCameraSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.render_all_cameras = False


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
    def __init__(self) -> None:
        super().__init__()
        self.render_main_pass = True
        self.disable_multisample_effects = False
        self.additional_post_process_materials: list[MoviePipelinePostProcessPass] = [
            MoviePipelinePostProcessPass(False, "", DEFAULT_DEPTH, True),
            MoviePipelinePostProcessPass(False, "", DEFAULT_MOTION_VECTORS, False)]


class MoviePipelineObjectIdPassIdType:
    FULL = _Enum("FULL")
    MATERIAL = _Enum("MATERIAL")
    ACTOR = _Enum("ACTOR")
    ACTOR_WITH_HIERARCHY = _Enum("ACTOR_WITH_HIERARCHY")
    FOLDER = _Enum("FOLDER")
    LAYER = _Enum("LAYER")


class MoviePipelineObjectIdRenderPass(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.id_type: Any = MoviePipelineObjectIdPassIdType.FULL
        self.include_translucent_objects = False


class EXRCompressionFormat:
    NONE = _Enum("NONE")
    PIZ = _Enum("PIZ")
    ZIP = _Enum("ZIP")
    DWAA = _Enum("DWAA")
    DWAB = _Enum("DWAB")


class MoviePipelineImageSequenceOutput_PNG(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineImageSequenceOutput_EXR(MoviePipelineSetting):  # noqa: N801
    def __init__(self) -> None:
        super().__init__()
        self.compression: Any = EXRCompressionFormat.PIZ
        self.multilayer = False


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
