"""The module a script gets as ``unreal`` while the fake editor runs it (``FakeEditor.run``
puts it in ``sys.modules["unreal"]``): the calls the scripts in ``unreal/`` make, under the
names the 5.6 stub and the MRQ stub declare, backed by the embedded engine — and nothing of the
editor itself. The tests import it too (``from tests.fakes.unreal import namespace as fu``).

Unreal behaviour it reproduces because the scripts depend on it: PIE starts and stops on the
frame after the request; runtime spawns need the PIE world; the capsule half-height is clamped
to the radius; without keep-alive the editor quits when the script returns; the PIE executor
refuses an unsaved level unless allowed; an auto-play sequence actor left in the level takes
every camera; setting a new skeletal mesh while the previous character still holds its mesh
crashes with a skeletal assertion (Table 2).
"""

from __future__ import annotations

from tests.fakes.unreal.frame import (  # noqa: F401 - the unreal namespace
    _m,
    _ue,
    camera_basis,
)
from tests.fakes.unreal.host import (  # noqa: F401 - the unreal namespace
    FakeCrash,
)
from tests.fakes.unreal.materials import (  # noqa: F401 - the unreal namespace
    BlendableLocation,
    Material,
    MaterialDomain,
    MaterialEditingLibrary,
    MaterialExpression,
    MaterialExpressionSceneTexture,
    MaterialFactoryNew,
    MaterialInterface,
    MaterialProperty,
    SceneTextureId,
)
from tests.fakes.unreal.movie_pipeline import (  # noqa: F401 - the unreal namespace
    EXRCompressionFormat,
    MoviePipeline,
    MoviePipelineAntiAliasingSetting,
    MoviePipelineCameraSetting,
    MoviePipelineConsoleVariableSetting,
    MoviePipelineDeferredPassBase,
    MoviePipelineExecutorBase,
    MoviePipelineExecutorJob,
    MoviePipelineGameOverrideSetting,
    MoviePipelineImageSequenceOutput_EXR,
    MoviePipelineImageSequenceOutput_PNG,
    MoviePipelineObjectIdPassIdType,
    MoviePipelineObjectIdRenderPass,
    MoviePipelineOutputSetting,
    MoviePipelinePIEExecutor,
    MoviePipelinePostProcessPass,
    MoviePipelinePrimaryConfig,
    MoviePipelineQueue,
    MoviePipelineSetting,
    _Delegate,
)
from tests.fakes.unreal.objects import (  # noqa: F401 - the unreal namespace
    Actor,
    AnimSequence,
    BlueprintCharacter,
    CameraActor,
    CameraFilmbackSettings,
    CameraFocusSettings,
    CapsuleComponent,
    Character,
    CharacterMovementComponent,
    CineCameraActor,
    CineCameraComponent,
    Controller,
    DefaultPawn,
    Info,
    Landscape,
    LevelSequenceActor,
    MovieSceneSequencePlaybackSettings,
    Object,
    Pawn,
    PlayerController,
    PlayerStart,
    PostProcessVolume,
    PrimitiveComponent,
    SceneComponent,
    SkeletalMesh,
    SkeletalMeshActor,
    SkeletalMeshComponent,
    StaticMeshActor,
    Volume,
    World,
)
from tests.fakes.unreal.sequencer import (  # noqa: F401 - the unreal namespace
    AssetTools,
    AssetToolsHelpers,
    LevelSequence,
    LevelSequenceEditorBlueprintLibrary,
    LevelSequenceFactoryNew,
    MovieScene3DTransformSection,
    MovieScene3DTransformTrack,
    MovieSceneBindingProxy,
    MovieSceneCameraCutSection,
    MovieSceneCameraCutTrack,
    MovieSceneScriptingChannel,
    MovieSceneScriptingDoubleChannel,
    MovieSceneSection,
    MovieSceneSkeletalAnimationParams,
    MovieSceneSkeletalAnimationSection,
    MovieSceneSkeletalAnimationTrack,
    MovieSceneTrack,
)
from tests.fakes.unreal.structs import (  # noqa: F401 - the unreal namespace
    AntiAliasingMethod,
    Array,
    Box,
    BoxSphereBounds,
    CameraFocusMethod,
    DirectoryPath,
    DrawDebugTrace,
    FrameNumber,
    FrameRate,
    HitResult,
    IntPoint,
    MovementMode,
    MovieSceneKeyInterpolation,
    MovieSceneTimeUnit,
    Rotator,
    SoftObjectPath,
    Text,
    TraceTypeQuery,
    Vector,
    _Enum,
)
from tests.fakes.unreal.subsystems import (  # noqa: F401 - the unreal namespace
    AIHelperLibrary,
    EditorActorSubsystem,
    EditorAssetLibrary,
    EditorPythonScripting,
    EditorSubsystem,
    GameplayStatics,
    LevelEditorSubsystem,
    MoviePipelineQueueSubsystem,
    SystemLibrary,
    UnrealEditorSubsystem,
    WorldPartitionBlueprintLibrary,
    get_editor_subsystem,
    log,
    log_error,
    log_warning,
    register_slate_post_tick_callback,
    unregister_slate_post_tick_callback,
)
from tests.fakes.unreal.world_partition import (  # noqa: F401 - the unreal namespace
    ObjectIterator,
    WorldPartitionRuntimeCellState,
    WorldPartitionStreamingQuerySource,
    WorldPartitionSubsystem,
)
