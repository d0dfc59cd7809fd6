"""Materials as the ground-truth script makes them (unreal/ue_layers.py): a post-process
Material from MaterialFactoryNew, one SceneTexture expression connected to the emissive colour.
The fake records what was set, so its MRQ render (``mrq_layers``) outputs the scene texture the
material reads — and nothing when the material was not made the way that works in Unreal
(post-process domain, after tonemapping, the expression's Color output on the emissive). A
stand-in: no Unreal runs here."""

from __future__ import annotations

from typing import Any

from tests.fakes.unreal.objects import Object
from tests.fakes.unreal.structs import unreal_enum

SceneTextureId = unreal_enum("SceneTextureId", "PPI_SCENE_DEPTH PPI_WORLD_NORMAL "
                             "PPI_CUSTOM_STENCIL PPI_VELOCITY")
MaterialDomain = unreal_enum("MaterialDomain", "MD_SURFACE MD_POST_PROCESS")
BlendableLocation = unreal_enum("BlendableLocation", "BL_SCENE_COLOR_AFTER_TONEMAPPING "
                                "BL_SCENE_COLOR_BEFORE_DOF")
MaterialProperty = unreal_enum("MaterialProperty", "MP_EMISSIVE_COLOR MP_BASE_COLOR")


class MaterialInterface(Object):
    pass


class MaterialExpression(Object):
    pass


class MaterialExpressionSceneTexture(MaterialExpression):
    def __init__(self) -> None:
        super().__init__()
        self._props.update({"scene_texture_id": SceneTextureId.PPI_SCENE_DEPTH,
                            "filtered": True})


class Material(MaterialInterface):
    def __init__(self, name: str = "", path: str = ""):
        super().__init__(name)
        self._path = path or name
        self._props["material_domain"] = MaterialDomain.MD_SURFACE
        self.blendable_location: Any = BlendableLocation.BL_SCENE_COLOR_AFTER_TONEMAPPING
        self.expressions: list[MaterialExpression] = []
        self.emissive: tuple[MaterialExpression, str] | None = None
        self.compiled = False

    def get_path_name(self) -> str:
        return self._path

    def scene_texture(self) -> Any:
        """The scene texture this material outputs in MRQ's buffer pipe, or None (a material that
        is not an after-tonemapping post-process material reading one texture to emissive)."""
        if (self._props["material_domain"] is not MaterialDomain.MD_POST_PROCESS
                or self.blendable_location
                is not BlendableLocation.BL_SCENE_COLOR_AFTER_TONEMAPPING
                or self.emissive is None or self.emissive[1] != "Color" or not self.compiled):
            return None
        return self.emissive[0].get_editor_property("scene_texture_id")


class MaterialFactoryNew(Object):
    pass


class MaterialEditingLibrary:
    @classmethod
    def create_material_expression(cls, material: Material, expression_class: type,
                                   node_pos_x: int = 0, node_pos_y: int = 0) -> Any:
        e = expression_class()
        material.expressions.append(e)
        material.compiled = False
        return e

    @classmethod
    def connect_material_property(cls, from_expression: MaterialExpression,
                                  from_output_name: str, property_: Any) -> bool:
        for m in _materials_holding(from_expression):
            if property_ is MaterialProperty.MP_EMISSIVE_COLOR:
                m.emissive = (from_expression, from_output_name)
            m.compiled = False
            return True
        return False

    @classmethod
    def recompile_material(cls, material: Material) -> None:
        material.compiled = True


def _materials_holding(e: MaterialExpression) -> list[Material]:
    from tests.fakes.unreal.host import running_editor

    return [a for a in running_editor().assets.values()
            if isinstance(a, Material) and e in a.expressions]
