"""Model loading for the embedded engine: any supported file as a NodePath in the contract frame
(Z up, metres), and the node rules both engine passes share (collision-only and render-only
nodes). Used by Stage I (``embedded``), Stage II (``instance_render``, ``level_render``) and the
renderability screen's ``geometry_probe``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Unreal's custom-collision mesh prefixes (FBX import): collide, never drawn
COLLISION_ONLY_PREFIXES = ("UCX_", "UBX_", "UCP_", "USP_")


def is_collision_only(np_: Any) -> bool:
    """A node (or an ancestor) named with a custom-collision prefix or tagged
    ``collision=only``: it collides but is never drawn (invisible blockers, UCX meshes)."""
    if np_.getNetTag("collision") == "only":
        return True
    n = np_
    while not n.isEmpty():
        if n.getName().startswith(COLLISION_ONLY_PREFIXES):
            return True
        n = n.getParent()
    return False


def is_render_only(np_: Any) -> bool:
    """A node (or an ancestor) tagged ``collision=none``: drawn, never collides (foliage,
    decals, set dressing with collision switched off)."""
    return bool(np_.getNetTag("collision") == "none")


def fixed_draw_order() -> None:
    """Draw opaque geometry in scene-graph order, the same in every process.

    Panda3D's default ``opaque`` bin is state-sorted: it orders geoms by comparing their
    RenderState and vertex-data *pointers*, so the draw order follows the heap layout of the
    process, which thread timing changes under CPU load. Where two opaque surfaces meet at
    the same depth (a shirt's hem over the trousers), the first one drawn keeps the pixel: one
    pixel of one view differed in about one loaded render in five (docs/known-issues.md).
    An unsorted bin draws in traversal order."""
    from panda3d.core import CullBinManager

    bins = CullBinManager.getGlobalPtr()
    bins.setBinType(bins.findBin("opaque"), CullBinManager.BT_unsorted)


def _configure_panda(display: str = "p3headlessgl", window: str = "none") -> None:
    from panda3d.core import loadPrcFileData

    loadPrcFileData("wmforge", f"""
        window-type {window}
        load-display {display}
        audio-library-name null
        model-cache-dir
        notify-level-device fatal
        notify-level-display error
        load-file-type p3assimp
    """)
    fixed_draw_order()


def _load_gltf(p: Path) -> Any:
    """panda3d-gltf's ``load_model``, with EXT_texture_webp textures pointed at their fallback
    image (or left untextured when WebP is their only image: Panda3D reads no WebP), noted on
    the model root as the tag ``wmforge_texture_notes``. Percent-escaped image URIs are
    decoded by panda3d-gltf itself."""
    from gltf._converter import Converter
    from gltf.parseutils import parse_gltf_file

    from ..core.gltf import webp_fallbacks

    data = parse_gltf_file(str(p))
    notes = webp_fallbacks(data) if isinstance(data, dict) else []
    conv = Converter(str(p))
    conv.update(data)
    root = conv.active_scene.node()
    if notes:
        root.setTag("wmforge_texture_notes", "; ".join(notes))
    return root


def load_model(path: str, scale: float = 1.0, up_axis: str | None = None) -> Any:
    """Load any supported model as a NodePath in the contract frame (Z up, metres).

    Panda3D's loaders convert what a file declares (glTF: Y-up; egg: ``<CoordinateSystem>``);
    ``up_axis`` is the sidecar's override of that declaration, applied as the correction from
    the declared to the overriding system — the same rule as the inventory's probe
    (``core.model_probe.effective_coordinate_system``)."""
    from panda3d.core import Filename, LMatrix4f, Loader, LoaderOptions, NodePath

    from ..core.model_probe import (
        correction_matrix,
        declared_coordinate_system,
        effective_coordinate_system,
    )

    p = Path(path)
    if p.suffix.lower() in (".glb", ".gltf"):
        np_ = NodePath(_load_gltf(p))  # converts glTF's Y-up to Z-up
    else:
        node = Loader.getGlobalPtr().loadSync(Filename.fromOsSpecific(str(p)),
                                              LoaderOptions(LoaderOptions.LF_no_cache))
        if node is None:
            raise OSError(f"{path}: Panda3D could not load this model")
        np_ = NodePath(node)
    declared, _ = declared_coordinate_system(p)
    effective, _ = effective_coordinate_system(p, up_axis)
    if effective != declared:
        m = correction_matrix(declared, effective)
        holder = NodePath("up_fix")
        np_.reparentTo(holder)
        # Panda3D's matrices are row-vector (v · M): the transpose of the column form
        np_.setMat(LMatrix4f(m[0][0], m[1][0], m[2][0], 0, m[0][1], m[1][1], m[2][1], 0,
                             m[0][2], m[1][2], m[2][2], 0, 0, 0, 0, 1))
        np_ = holder
    if scale != 1.0:
        np_.setScale(scale)
    return np_
