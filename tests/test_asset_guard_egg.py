"""The guard's egg references (``core.asset_guard``): every way an egg names a file is checked
against its pack before a load, and ``cluster.model_refs`` keys the same references."""
from __future__ import annotations

from pathlib import Path

import pytest

from stages.cluster import model_refs
from stages.core import asset_guard
from stages.core.asset_guard import AssetInputError, check_egg, egg_references

# each form names ../../secret.png, outside the pack (root: pack/, the egg in pack/models/)
ESCAPES = {
    "keyword in lower case": b'<texture> t { "../../secret.png" }',
    "a quoted name with a space": b'<Texture> "my tex" { "../../secret.png" }',
    "an alpha file": (b'<Texture> t { ok.png <Scalar> alpha-file { "../../secret.png" } }'),
    "an upper-case file keyword": b'<FILE> f { ../../secret.png }',
    # the egg lexer drops comments outside quoted strings: Panda3D loads these files too
    "a block comment before the brace": b'<Texture> t /* c */ { "../../secret.png" }',
    "a line comment before the brace": b'<Texture> t // c\n { "../../secret.png" }',
    "a block comment before the file": b'<Texture> t { /* c */ "../../secret.png" }',
    # and reads '/*' or '//' inside a longer run as part of a token, as it reads \f
    "a group named /*g": b'<Group> /*g { <Texture> t { ../../secret.png } }',
    "a path with //": b"<Texture> t { maps//../../../secret.png }",
    "a path with a form feed": b"<Texture> t { maps\x0c/../../../secret.png }",
    "no name": b'<Texture> { "../../secret.png" }',
    "a long run of white space": b"<Texture>" + b" " * 200_000 + b'{ "../../secret.png" }',
}


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    (tmp_path / "pack" / "models").mkdir(parents=True)
    (tmp_path / "pack" / "models" / "ok.png").write_bytes(b"x")
    (tmp_path / "secret.png").write_bytes(b"secret")
    return tmp_path / "pack"


@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_every_form_of_an_egg_reference_that_leaves_its_pack_is_refused(pack: Path, form: str
                                                                         ) -> None:
    with pytest.raises(AssetInputError) as err:
        check_egg(b"<CoordinateSystem> { Z-up }\n" + ESCAPES[form], pack / "models", pack)
    assert err.value.reason == asset_guard.URI_OUTSIDE_ROOT
    assert "../../secret.png" in str(err.value)


def test_references_inside_the_pack_pass_and_are_read_in_file_order(pack: Path) -> None:
    egg = (b'<Texture> "a b" { "ok.png" <Scalar> alpha-file { "alpha.png" } }\n'
           b"<file> ext { sub/x.egg }\n")
    check_egg(egg, pack / "models", pack)
    assert egg_references(egg) == [("Texture", "ok.png"), ("Scalar", "alpha.png"),
                                   ("file", "sub/x.egg")]


def test_the_render_key_reads_the_references_the_guard_checks(pack: Path) -> None:
    egg = pack / "models" / "m.egg"
    egg.write_bytes(b"\n".join(ESCAPES.values()))
    # one reader: what the key would hash is what the guard refuses
    assert model_refs.raw_references(egg) == [ref for _, ref in
                                              egg_references(egg.read_bytes())]
    refs = model_refs.raw_references(egg)
    assert refs is not None and len(refs) == len(ESCAPES) + 1  # the alpha form's ok.png too
    assert [r for r in refs if r != "ok.png"] == [
        ref for _, ref in egg_references(b"\n".join(ESCAPES.values())) if ref != "ok.png"]
    assert all(r.endswith("../../secret.png") for r in refs if r != "ok.png")


def test_a_run_that_starts_with_a_comment_mark_is_a_token(pack: Path) -> None:
    # '/*c*/' is one unquoted token to the egg lexer: the file it names is '/*c*/', absolute
    assert egg_references(b'<Texture> t { /*c*/ "x.png" }') == [("Texture", "/*c*/")]
    with pytest.raises(AssetInputError, match="absolute"):
        check_egg(b'<Texture> t { /*c*/ "x.png" }', pack / "models", pack)
    # a keyword glued to a token is no keyword; many in a row are read in linear time
    assert egg_references(b"<Texture>t { x.png } x<File> f { y.egg }") == []
    assert egg_references(b"<Texture>" * 50_000 + b" { z.png }") == []


def test_commented_out_references_and_strings_that_look_like_comments(pack: Path) -> None:
    egg = (b'// <Texture> old { "../../secret.png" }\n'
           b'/* <Texture> older { "../../secret.png" } */\n'
           b'<Texture> "a // b" { "ok.png" } /* a block comment left open at the end')
    assert egg_references(egg) == [("Texture", "ok.png")]
    check_egg(egg, pack / "models", pack)
