"""The user Unreal Editor runs as when the runner is root (``unreal.run_as``, §8.4): its ids,
the folders handed to it, the paths it must be able to reach."""

from __future__ import annotations

import os
from pathlib import Path

from .unreal import UnrealConfig, UnrealLaunchError, refuse_root


def engine_user(cfg: UnrealConfig, folders: list[Path], euid: int | None = None,
                dirs: list[Path] | None = None) -> tuple[int, int, list[int]] | None:
    """Unreal refuses root (§8.4). Under root the editor runs as ``unreal.run_as`` instead:
    (uid, gid, supplementary groups) of that user, with ``folders`` (recursively) and ``dirs``
    (created if missing, the folder itself: it publishes into them) handed to it; None when the
    runner is not root. A missing user is an UnrealLaunchError naming it."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    import pwd

    try:
        pw = pwd.getpwnam(cfg.run_as)
    except KeyError:
        refuse_root(cfg)  # names the user to create or to run as
        raise
    if pw.pw_uid == 0:
        refuse_root(cfg)
    for folder in folders:
        for dirpath, _dirs, files in os.walk(folder):
            os.chown(dirpath, pw.pw_uid, pw.pw_gid)
            for f in files:
                os.chown(os.path.join(dirpath, f), pw.pw_uid, pw.pw_gid)
    for d in dirs or []:
        d.mkdir(parents=True, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
    return pw.pw_uid, pw.pw_gid, os.getgrouplist(pw.pw_name, pw.pw_gid)


def unreachable(path: Path, uid: int, gids: list[int], write: bool = False) -> str:
    """Why user ``uid`` (groups ``gids``) cannot read (``write``: write into) ``path``: ""
    when it can. Every ancestor must be searchable by that user (mode bits as the kernel checks
    them for a non-root user)."""
    import stat as st_

    def allowed(p: Path, bits: int) -> bool:  # bits: 4 read, 2 write, 1 execute
        s = p.stat()
        if s.st_uid == uid:
            mode = (s.st_mode >> 6) & 7
        elif s.st_gid in gids:
            mode = (s.st_mode >> 3) & 7
        else:
            mode = s.st_mode & 7
        return mode & bits == bits

    path = path.absolute()
    for anc in reversed(path.parents):
        if not allowed(anc, 1):
            return f"{anc} (mode {anc.stat().st_mode & 0o777:o}, uid {anc.stat().st_uid}) " \
                   "is not searchable"
    is_dir = st_.S_ISDIR(path.stat().st_mode)
    need = (4 | (1 if is_dir else 0)) | (2 if write else 0)
    if not allowed(path, need):
        return f"{path} (mode {path.stat().st_mode & 0o777:o}, uid {path.stat().st_uid}) is " \
               f"not {'writable' if write else 'readable'}"
    return ""


def check_reachable(cfg: UnrealConfig, user: tuple[int, int, list[int]] | None,
                    read: list[Path], write: list[Path]) -> None:
    """Under root: every path the editor reads or writes is reachable by ``unreal.run_as``,
    or an UnrealLaunchError names the first that is not. Paths that do not exist are skipped
    (the editor's own error then names them)."""
    if user is None:
        return
    for paths, w in ((read, False), (write, True)):
        for p in paths:
            if not p.exists():
                continue
            why = unreachable(p, user[0], user[2], write=w)
            if why:
                raise UnrealLaunchError(
                    f"the editor runs as '{cfg.run_as}' (uid {user[0]}) and cannot "
                    f"{'write into' if w else 'read'} {p}: {why}; keep the work folders and "
                    "the trajectories where that user can reach them (e.g. under /srv), not "
                    "under /root")
