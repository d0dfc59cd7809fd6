"""The Sequencer classes of the fake ``unreal`` module: Level Sequences with their bindings,
tracks, sections and keyed channels, and the asset tools that create them; what
unreal/ue_sequence.py calls, recorded so the tests can read the sequence back."""

from __future__ import annotations

from typing import Any

from tests.fakes.unreal.host import running_editor
from tests.fakes.unreal.objects import Actor, AnimSequence, Object
from tests.fakes.unreal.structs import FrameNumber, FrameRate, Rotator, Vector


class MovieSceneScriptingChannel(Object):
    pass


class MovieSceneScriptingDoubleChannel(MovieSceneScriptingChannel):
    """A double channel: keys by frame, evaluated between them as Sequencer does for linear
    keys — the value is interpolated as a number, so an angle keyed 179 then -179 passes
    through 0 (Sequencer does not wrap Euler channels)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.keys: dict[int, float] = {}
        self.interp: list[Any] = []

    def add_key(self, time: FrameNumber, new_value: float, sub_frame: float = 0.0,
                time_unit: Any = None, interpolation: Any = None) -> None:
        self.keys[time.value] = float(new_value)
        self.interp.append(interpolation)

    def evaluate(self, t: float) -> float:
        """The value at (fractional) frame ``t``: linear between keys, held outside them."""
        if not self.keys:
            return 0.0
        ks = sorted(self.keys)
        if t <= ks[0]:
            return self.keys[ks[0]]
        if t >= ks[-1]:
            return self.keys[ks[-1]]
        lo = max(k for k in ks if k <= t)
        hi = min(k for k in ks if k > t)
        a = (t - lo) / (hi - lo)
        return self.keys[lo] + a * (self.keys[hi] - self.keys[lo])


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

    def evaluate(self, t: float) -> tuple[tuple[float, ...], tuple[float, ...],
                                          tuple[float, ...]] | None:
        """(location, rotation as roll/pitch/yaw, scale) the transform track gives at frame
        ``t``; None without a transform track."""
        if not any(isinstance(x, MovieScene3DTransformTrack) for x in self.tracks):
            return None
        ch = {c.get_name(): c for c in self.transform().channels}
        v = [ch[n].evaluate(t) for n in MovieScene3DTransformSection.NAMES]
        return tuple(v[0:3]), tuple(v[3:6]), tuple(v[6:9])


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
                     factory: Any, calling_context: str = "None") -> Object | None:
        """Like AssetToolsImpl::CreateAsset: an asset already at that path (loaded, or saved on
        disk by an earlier editor) is not replaced: the call logs and returns None."""
        path = f"{package_path}/{asset_name}.{asset_name}"
        ed = running_editor()
        if path in ed.assets or path in ed.disk:
            ed.write_log("LogAssetTools", "Warning: ", f"An asset already exists at location "
                         f"{package_path}")
            return None
        made = asset_class(asset_name, path)
        ed.assets[path] = made
        if isinstance(made, LevelSequence):
            ed.sequences[path] = made
        return made


class AssetToolsHelpers:
    @classmethod
    def get_asset_tools(cls) -> AssetTools:
        return AssetTools()


class LevelSequenceEditorBlueprintLibrary:
    """Sequencer in the editor: an open sequence drives its bound actors at the current time."""

    _open: LevelSequence | None = None

    @classmethod
    def open_level_sequence(cls, level_sequence: LevelSequence) -> bool:
        cls._open = level_sequence
        return True

    @classmethod
    def set_current_time(cls, new_frame: int) -> None:
        seq = cls._open
        assert seq is not None, "no level sequence open"
        for b in seq.bindings:
            ev = b.evaluate(float(new_frame))
            if ev is None:
                continue
            b.object.location = Vector(*ev[0])
            b.object.rotation = Rotator(*ev[1])
            if b.object.root_component is not None:
                b.object.root_component.relative_scale = Vector(*ev[2])

    @classmethod
    def close_level_sequence(cls) -> None:
        cls._open = None
