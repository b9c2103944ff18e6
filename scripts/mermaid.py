"""Mermaid from npm, served by the documentation site itself, so diagrams render offline.

The theme draws a ```mermaid block with the `mermaid` object of the page, and loads it from a
CDN only when the page has none. This module is a MkDocs hook (mkdocs.yml `hooks:`) that adds
the pinned release's `dist/mermaid.min.js` to the site as assets/javascripts/mermaid.min.js
(mkdocs.yml loads it through `extra_javascript`), and the command that fetches it once:

    python scripts/mermaid.py        (scripts/setup runs it; needs npm)

The package comes from the npm registry with `npm pack` (the one tarball, no dependency tree:
its dist/mermaid.min.js is a self-contained bundle), is checked against the integrity pinned
here, and is kept in .cache/mermaid-VERSION/ of the checkout. A build without it fails and says
what to run; `mkdocs build` runs the fetch itself when npm is there.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The theme's own CDN fallback asks for mermaid@11; a newer major may not draw with it.
VERSION = "11.17.2"
INTEGRITY = "sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg=="
CACHED = ROOT / ".cache" / f"mermaid-{VERSION}" / "mermaid.min.js"
SITE_PATH = "assets/javascripts/mermaid.min.js"


class FetchError(Exception):
    """The package could not be fetched or did not match its pinned integrity."""


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch() -> Path:
    """The cached mermaid.min.js, fetched with `npm pack` first when missing."""
    if CACHED.is_file():
        return CACHED
    npm = shutil.which("npm")
    if npm is None:
        raise FetchError(f"{CACHED} is missing and npm is not installed: run scripts/setup (it installs npm)")
    print(f"fetching mermaid@{VERSION} from npm into {CACHED.parent}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([npm, "pack", f"mermaid@{VERSION}", "--silent"], cwd=tmp, capture_output=True,
                              text=True)
        tarballs = list(Path(tmp).glob("mermaid-*.tgz"))
        if done.returncode != 0 or len(tarballs) != 1:
            raise FetchError(f"npm pack mermaid@{VERSION} failed (exit {done.returncode}): {done.stderr.strip()}")
        found = _integrity(tarballs[0])
        if found != INTEGRITY:
            raise FetchError(f"mermaid@{VERSION} from npm has integrity {found}, not the pinned {INTEGRITY}")
        with tarfile.open(tarballs[0]) as archive:
            member = archive.extractfile("package/dist/mermaid.min.js")
            if member is None:
                raise FetchError(f"mermaid@{VERSION} holds no dist/mermaid.min.js")
            data = member.read()
    CACHED.parent.mkdir(parents=True, exist_ok=True)
    partial = CACHED.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(CACHED)
    return CACHED


# -- the MkDocs hook ---------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    try:
        source = fetch()
    except FetchError as error:
        raise PluginError(f"Mermaid for the offline diagrams: {error}") from error
    files.append(File.generated(config, SITE_PATH, abs_src_path=str(source)))
    return files


def main() -> int:
    try:
        print(fetch())
    except FetchError as error:
        print(f"scripts/mermaid.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
