"""Where a distribution came from, as its direct_url.json (PEP 610) says: part of what is
installed and of what a snapshot records. Its own module, so that reading a snapshot does not
import the installed-distribution reader."""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct


class Source(Struct, frozen=True):
    """Where a distribution came from, as its direct_url.json (PEP 610) says."""

    kind: str  # "index", "editable", "directory", "url", "file", "vcs"
    url: str | None = None
    vcs: str | None = None
    commit: str | None = None
    requested_revision: str | None = None
    subdirectory: str | None = None

    @classmethod
    def from_direct_url(cls, data: Mapping[str, object]) -> Source:
        url = str(data.get("url", ""))
        subdirectory = data.get("subdirectory")
        sub = str(subdirectory) if subdirectory else None
        vcs_info = data.get("vcs_info")
        if isinstance(vcs_info, dict):
            revision = vcs_info.get("requested_revision")
            return cls(
                kind="vcs",
                url=url,
                vcs=str(vcs_info.get("vcs", "")),
                commit=str(vcs_info.get("commit_id", "")),
                requested_revision=str(revision) if revision else None,
                subdirectory=sub,
            )
        dir_info = data.get("dir_info")
        if isinstance(dir_info, dict):
            kind = "editable" if dir_info.get("editable") else "directory"
            return cls(kind=kind, url=url, subdirectory=sub)
        kind = "file" if url.startswith("file:") else "url"
        return cls(kind=kind, url=url, subdirectory=sub)
