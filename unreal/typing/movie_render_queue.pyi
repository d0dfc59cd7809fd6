# Movie Render Queue classes used by unreal/stage2_mrq.py, appended to the UE 5.6 stub (whose
# generator ran with the MovieRenderPipeline plugin off). Every name and signature is taken from
# Epic's Python API reference; the page is cited above each class. Base: UE 5.6 (pages for 5.7
# list the same members where 5.6 is not served). Only what the scripts use is declared.

_S = TypeVar('_S', bound='MoviePipelineSetting')

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipeline?application_version=5.6
class MoviePipeline(Object): ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineSetting?application_version=5.6
class MoviePipelineSetting(Object): ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineConfigBase?application_version=5.6
class MoviePipelineConfigBase(Object):
    def find_or_add_setting_by_class(self, class_: Type[_S]) -> _S: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelinePrimaryConfig?application_version=5.6
class MoviePipelinePrimaryConfig(MoviePipelineConfigBase): ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineOutputSetting?application_version=5.6
class MoviePipelineOutputSetting(MoviePipelineSetting):
    output_directory: DirectoryPath
    file_name_format: str
    output_resolution: IntPoint
    zero_pad_frame_numbers: int
    use_custom_frame_rate: bool
    output_frame_rate: FrameRate
    override_existing_output: bool
    flush_disk_writes_per_shot: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineAntiAliasingSetting?application_version=5.6
class MoviePipelineAntiAliasingSetting(MoviePipelineSetting):
    spatial_sample_count: int
    temporal_sample_count: int
    render_warm_up_count: int
    engine_warm_up_count: int
    use_camera_cut_for_warm_up: bool
    render_warm_up_frames: bool
    override_anti_aliasing: bool
    anti_aliasing_method: AntiAliasingMethod

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/AntiAliasingMethod?application_version=5.6
# (module Engine, SceneUtils.h; exposed to Python through MRQ's property, so absent from the
# stub generated with the plugin off)
class AntiAliasingMethod(EnumBase):
    AAM_NONE: AntiAliasingMethod
    AAM_FXAA: AntiAliasingMethod
    AAM_TEMPORAL_AA: AntiAliasingMethod
    AAM_MSAA: AntiAliasingMethod
    AAM_TSR: AntiAliasingMethod

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineCameraSetting?application_version=5.6
class MoviePipelineCameraSetting(MoviePipelineSetting):
    render_all_cameras: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelinePostProcessPass?application_version=5.6
# (struct FMoviePipelinePostProcessPass, MoviePipelineDeferredPasses.h: bEnabled, Name,
# Material, bHighPrecisionOutput — Name and bHighPrecisionOutput listed from 5.5 on; the 5.4
# page has only enabled/material, and 5.4's bUse32BitPostProcessMaterials is deprecated since)
class MoviePipelinePostProcessPass(StructBase):
    def __init__(self, enabled: bool = False, name: str = '', material: MaterialInterface = ..., high_precision_output: bool = False) -> None: ...
    enabled: bool
    name: str
    material: MaterialInterface
    high_precision_output: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineDeferredPassBase?application_version=5.6
class MoviePipelineDeferredPassBase(MoviePipelineSetting):
    additional_post_process_materials: Array[MoviePipelinePostProcessPass]
    disable_multisample_effects: bool
    render_main_pass: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineObjectIdPassIdType?application_version=5.6
# (plugin MoviePipelineMaskRenderPass, "Movie Render Queue Additional Render Passes")
class MoviePipelineObjectIdPassIdType(EnumBase):
    FULL: MoviePipelineObjectIdPassIdType
    MATERIAL: MoviePipelineObjectIdPassIdType
    ACTOR: MoviePipelineObjectIdPassIdType
    ACTOR_WITH_HIERARCHY: MoviePipelineObjectIdPassIdType
    FOLDER: MoviePipelineObjectIdPassIdType
    LAYER: MoviePipelineObjectIdPassIdType

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineObjectIdRenderPass?application_version=5.6
# (Editor only: it reads the hit proxies; cryptomatte layers ActorHitProxyMask00..02)
class MoviePipelineObjectIdRenderPass(MoviePipelineSetting):
    id_type: MoviePipelineObjectIdPassIdType
    include_translucent_objects: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/EXRCompressionFormat?application_version=5.6
class EXRCompressionFormat(EnumBase):
    NONE: EXRCompressionFormat
    PIZ: EXRCompressionFormat
    ZIP: EXRCompressionFormat
    DWAA: EXRCompressionFormat
    DWAB: EXRCompressionFormat

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineImageSequenceOutput_PNG?application_version=5.6
class MoviePipelineImageSequenceOutput_PNG(MoviePipelineSetting): ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineImageSequenceOutput_EXR?application_version=5.6
class MoviePipelineImageSequenceOutput_EXR(MoviePipelineSetting):
    compression: EXRCompressionFormat
    multilayer: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineGameOverrideSetting?application_version=5.6
class MoviePipelineGameOverrideSetting(MoviePipelineSetting):
    flush_streaming_managers: bool

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineConsoleVariableSetting?application_version=5.6
class MoviePipelineConsoleVariableSetting(MoviePipelineSetting):
    def add_or_update_console_variable(self, name: str, value: float) -> bool: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineExecutorJob?application_version=5.6
class MoviePipelineExecutorJob(Object):
    job_name: str
    map: SoftObjectPath
    sequence: SoftObjectPath
    def get_configuration(self) -> MoviePipelinePrimaryConfig: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineQueue?application_version=5.6
class MoviePipelineQueue(Object):
    def allocate_new_job(self, job_type: Type[MoviePipelineExecutorJob]) -> MoviePipelineExecutorJob: ...
    def delete_all_jobs(self) -> None: ...
    def get_jobs(self) -> Array[MoviePipelineExecutorJob]: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/OnMoviePipelineExecutorFinished?application_version=5.6
# parameters: pipeline_executor (MoviePipelineExecutorBase), success (bool)
class OnMoviePipelineExecutorFinished(MulticastDelegateBase):
    def add_callable(self, callable: Callable[[MoviePipelineExecutorBase, bool], None]) -> None: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/OnMoviePipelineExecutorErrored?application_version=5.6
# parameters: pipeline_executor, pipeline_with_error (MoviePipeline), is_fatal (bool), error_text (Text)
class OnMoviePipelineExecutorErrored(MulticastDelegateBase):
    def add_callable(self, callable: Callable[[MoviePipelineExecutorBase, MoviePipeline, bool, Text], None]) -> None: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineExecutorBase?application_version=5.6
class MoviePipelineExecutorBase(Object):
    on_executor_finished_delegate: OnMoviePipelineExecutorFinished
    on_executor_errored_delegate: OnMoviePipelineExecutorErrored

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineLinearExecutorBase?application_version=5.6
class MoviePipelineLinearExecutorBase(MoviePipelineExecutorBase): ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelinePIEExecutor?application_version=5.6
class MoviePipelinePIEExecutor(MoviePipelineLinearExecutorBase):
    def set_allow_using_unsaved_levels(self, should_allow: bool) -> None: ...

# https://dev.epicgames.com/documentation/en-us/unreal-engine/python-api/class/MoviePipelineQueueSubsystem?application_version=5.6
class MoviePipelineQueueSubsystem(EditorSubsystem):
    def get_queue(self) -> MoviePipelineQueue: ...
    def is_rendering(self) -> bool: ...
    def render_queue_with_executor_instance(self, executor: MoviePipelineExecutorBase) -> None: ...
