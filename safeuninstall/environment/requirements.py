"""What to remove, read the way ``uv pip uninstall`` reads it: arguments and requirement files.

uv removes by name: a PEP 508 requirement's version, extras, marker and URL are ignored
(``rich==15.0.0`` removes whatever rich is installed, as pip does). An argument that is a path
or a URL and no name (an "unnamed" requirement: ``./project``, ``file:///...``, ``x.whl``)
names the distribution installed from there, by its direct_url.json; so does a ``-e`` line.

A shell-style pattern (``nvidia-*-cu12``, ``NVIDIA_*``: a name with ``*`` or ``?``, and then
``[...]`` too; ``name[x]`` alone is a requirement with an extra) names
every installed distribution whose canonical name it matches (fnmatch, over the PEP 503 form:
the pattern is lower-cased and ``-``, ``_`` and ``.`` are one character, as in names). It is
expanded against the installed set by plan.plan_removal, which lists the expansion; a pattern
matching nothing is an error. uv has no patterns: this is the tool's own.

Requirement files: a requirements.txt, whose option lines (``--index-url``, ``-f``,
``--hash`` ...) are ignored with a note and whose nested ``-r`` files are followed (a file
reached twice is read once, as uv does; a cycle is refused); a script with inline metadata
(PEP 723). From a pylock.toml, a pyproject.toml, a setup.py or a setup.cfg ``uv pip uninstall``
reads no requirement and removes nothing: they are refused, with what to pass instead.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from msgspec import Struct
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from safeuninstall.base.bounded import Unusable, read_bytes, read_fd
from safeuninstall.base.errors import InvalidInput, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_FILE_BYTES = 16 * 1024 * 1024  # a list of names; 16 MiB of them is not one
MAX_DEPTH = 16  # nested -r files; uv has no limit, a real project needs two or three

# What uv takes for an archive (uv-pep508 looks_like_archive; pip's filetypes.py).
_ARCHIVES = (
    ".whl",
    ".tar.gz",
    ".zip",
    ".tar.bz2",
    ".tar.lz",
    ".tar.lzma",
    ".tar.xz",
    ".tar.zst",
    ".tar",
    ".tbz",
    ".tgz",
    ".tlz",
    ".txz",
)
_VCS = ("git+", "hg+", "svn+", "bzr+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# A pattern: what a name may hold, plus the wildcards of fnmatch, with a ``*`` or a ``?``
# (``name[x]`` alone is a requirement with an extra, as uv reads it).
_PATTERN = re.compile(r"[A-Za-z0-9._*?\[\]!-]*[*?][A-Za-z0-9._*?\[\]!-]*")
_ENV_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_PYLOCK = re.compile(r"^pylock\.([^.]+\.)?toml$")
# requirements.txt options uv reads for an install, which an uninstall ignores.
_IGNORED_OPTIONS = (
    "--index-url",
    "-i",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--no-index",
    "--require-hashes",
    "--no-binary",
    "--only-binary",
    "--trusted-host",
    "--pre",
    "--prefer-binary",
    "--use-feature",
    "--global-option",
    "--config-settings",
)
_LOCATION_OPTION = re.compile(
    r"^(-i|--index-url|--extra-index-url|-f|--find-links)(?:\s*=\s*|\s+)(\S.*)$"
)
_LINE_OPTION = re.compile(
    r"^(-r|--requirement|-c|--constraint|-e|--editable)(?:\s*=\s*|\s+)(\S.*)$"
)


class Wanted(Struct, frozen=True):
    """One thing to remove: a distribution by name, or the one installed from a location."""

    text: str  # as given, for messages
    name: str | None = None  # canonical name of a named requirement
    location: str | None = None  # an unnamed one: an absolute local path, or a URL
    specifier: str = ""  # the version specifier given with a name ("==15.0.0"), if any
    origin: str = ""  # where it was read ("req.txt:3"); "" for the command line
    pattern: str | None = None  # a shell-style pattern, normalised (pattern_key)


class Request(Struct, frozen=True):
    """Everything asked for, and what was read but ignored (a note each)."""

    wanted: tuple[Wanted, ...]
    notes: tuple[str, ...] = ()


def collect(
    arguments: Sequence[str],
    files: Sequence[str],
    cwd: Path,
    environ: Mapping[str, str] | None = None,
) -> Request:
    """The package arguments, then each requirement file (``-`` is standard input)."""
    reader = _Reader(cwd, os.environ if environ is None else environ)
    wanted = [reader.argument(text) for text in arguments]
    for name in files:
        wanted += reader.file(name)
    return Request(tuple(wanted), tuple(reader.notes))


def read_request(
    arguments: Sequence[str],
    files: Sequence[str],
    cwd: Path,
    environ: Mapping[str, str] | None = None,
) -> Request:
    """``collect``, refusing a command line that names nothing. Requirement files that name
    no package (empty, only comments or options, /dev/null, a FIFO no one writes to: its open
    does not wait) are a request for nothing, said in a note, as uv warns and does nothing."""
    request = collect(arguments, files, cwd, environ)
    if not request.wanted:
        if files:
            named = ", ".join(f"-r {name}" for name in files)
            note = f"{named}: no package named; nothing to uninstall"
            return Request((), (*request.notes, note))
        raise InvalidInput("no package names given (pass PACKAGE... or -r FILE)")
    return request


_PATTERN_CHARS = re.compile(r"[A-Za-z0-9._*?\[\]!-]+")


def _bracket_problem(text: str) -> str | None:
    """What is wrong with the ``[...]`` sets of a pattern, read as fnmatch reads them (``!``
    first negates, a ``]`` right after the opening is a member); None when nothing is."""
    i = 0
    while i < len(text):
        if text[i] == "]":
            return "a ']' without its '['"
        if text[i] == "[":
            j = i + 1
            if j < len(text) and text[j] == "!":
                j += 1
            if j < len(text) and text[j] == "]":
                j += 1
            close = text.find("]", j)
            if close < 0:
                return "an unclosed '['"
            i = close
        i += 1
    return None


def _refuse_bad_brackets(text: str, where: str, *, command_line: bool) -> None:
    """A pattern-like argument whose ``[...]`` is broken (``'['``, ``nvidia-*[``): fnmatch
    would read its ``[`` as a letter no name has, so it could only match nothing. On the
    command line that is a usage error (exit 2), said as such."""
    if not _PATTERN_CHARS.fullmatch(text) or not ("[" in text or "]" in text):
        return
    problem = _bracket_problem(text)
    if problem is None:
        return
    message = (
        f"{where}{_shown(text)} is neither a package name nor a valid pattern ({problem}); "
        "a pattern is a name with * or ?, and [...] sets (quote it from the shell)"
    )
    raise UsageError(message) if command_line else InvalidInput(message)


def pattern_key(text: str) -> str:
    """A pattern in the form of the names it is matched against: lower case, and each run of
    ``-``, ``_`` and ``.`` one ``-`` (PEP 503), so ``NVIDIA_*`` matches ``nvidia-cublas``."""
    return re.sub(r"[-_.]+", "-", text).lower()


def looks_unnamed(text: str) -> bool:
    """A path or a URL rather than a name (uv-pep508 ``looks_like_unnamed_requirement``)."""
    bare = text.split("[", 1)[0] if text.endswith("]") else text
    if not bare:
        return False
    # Not a leading ``$``: ``${FOO}`` or ``$$$`` alone is no path for uv either (a parse
    # error, exit 2); ``${HOME}/pkg`` is one by its slash.
    if bare[0] in "/\\.~" or _SCHEME.match(bare) or "/" in bare or "\\" in bare:
        return True
    return is_archive(bare)


def is_archive(text: str) -> bool:
    return text.lower().endswith(_ARCHIVES)


def local_path(url: str) -> str | None:
    """The normalised path of a ``file:`` URL; None for any other URL."""
    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return os.path.normpath(unquote(parsed.path))  # POSIX: the only systems the tool runs on


class _Reader:
    def __init__(self, cwd: Path, environ: Mapping[str, str]) -> None:
        self.cwd = cwd
        self.environ = environ
        self.notes: list[str] = []
        self.seen: set[str] = set()  # files read, by real path: a second -r of one is skipped

    def _expanded(self, text: str) -> str:
        """``${NAME}`` replaced by the variable's value, as uv does; an unset one is left."""
        return _ENV_VAR.sub(lambda m: self.environ.get(m.group(1), m.group(0)), text)

    # -- one requirement --------------------------------------------------------------------

    def argument(self, text: str, origin: str = "", *, editable: bool = False) -> Wanted:
        where = f"{origin}: " if origin else ""
        text = text.strip()
        if not text:
            raise InvalidInput(f"{where}an empty package argument")
        if _PLAIN_NAME.fullmatch(text) and not (editable or is_archive(text)):
            return Wanted(text=text, name=canonicalize_name(text), origin=origin)
        if _PATTERN.fullmatch(text) and not editable:
            _refuse_bad_brackets(text, where, command_line=not origin)
            return Wanted(text=text, pattern=pattern_key(text), origin=origin)
        try:
            requirement = Requirement(text)
        except InvalidRequirement as err:
            # After -e, a location (``-e ${PROJECT}``), unless a variable is left unset.
            expanded = self._expanded(text)
            if (editable and not expanded.startswith("$")) or looks_unnamed(text):
                return self._unnamed(text, origin)
            _refuse_bad_brackets(text, where, command_line=not origin)
            reason = str(err).splitlines()[0] if str(err) else "not PEP 508"
            raise InvalidInput(
                f"{where}not a requirement: {_shown(text)} ({_shown(reason)[1:-1]})"
            ) from None
        bare = not (requirement.specifier or requirement.url or requirement.extras)
        if bare and (editable or is_archive(requirement.name)):
            # uv: a bare name that is an archive's (``x.tar.gz``) is a file; after -e, a
            # name is a folder of that name (``-e dagster`` is ``-e ./dagster``).
            return self._unnamed(text, origin)
        return Wanted(
            text=text,
            name=canonicalize_name(requirement.name),
            specifier=str(requirement.specifier),
            origin=origin,
        )

    def _unnamed(self, text: str, origin: str) -> Wanted:
        where = f"{origin}: " if origin else ""
        value = text
        if value.endswith("]") and "[" in value:  # extras: ignored, as for a name
            value = value[: value.index("[")]
        value = self._expanded(value)
        value = value.split("#", 1)[0]  # #egg=name, #subdirectory=...: not part of where
        path = local_path(value) if value.startswith("file:") else None
        if path is not None:
            return Wanted(text=text, location=path, origin=origin)
        if _SCHEME.match(value) and not re.match(r"^[A-Za-z]:[\\/]", value):
            if not (value.startswith(_VCS) or is_archive(urlparse(value).path)):
                raise InvalidInput(
                    f"{where}not a requirement: {_shown(text)}: a direct URL must end in a "
                    f"supported file extension ({', '.join(_ARCHIVES)}), or be a VCS URL"
                )
            return Wanted(text=text, location=value, origin=origin)
        local = Path(value).expanduser()
        absolute = os.path.normpath(self.cwd / local)
        return Wanted(text=text, location=absolute, origin=origin)

    # -- requirement files ------------------------------------------------------------------

    def file(self, name: str, chain: tuple[str, ...] = ()) -> list[Wanted]:
        """The requirements of the file ``name`` (relative to the working folder)."""
        if name == "-":
            return self._requirements_txt(_read_stdin(), "-", chain)
        if name.startswith(("http://", "https://")):
            raise InvalidInput(
                f"-r {name}: a remote requirements file is not fetched; download it and pass "
                "the file"
            )
        path = Path(local_path(name) or name) if name.startswith("file:") else Path(name)
        path = path.expanduser()
        if not path.is_absolute():
            path = self.cwd / path
        real = os.path.realpath(path)
        if real in chain:
            cycle = " -> ".join([*chain[chain.index(real) :], real])
            raise InvalidInput(f"-r {name}: the requirement files include each other: {cycle}")
        if len(chain) >= MAX_DEPTH:
            raise InvalidInput(f"-r {name}: more than {MAX_DEPTH} nested requirement files")
        if real in self.seen:
            return []  # uv reads a file reached twice once
        self.seen.add(real)
        text = _read_file(path, name)
        base = path.name
        if base in ("setup.py", "setup.cfg", "pyproject.toml") or _PYLOCK.match(base):
            raise InvalidInput(
                f"-r {name}: uv pip uninstall reads no requirement from a {base} (it removes "
                "nothing, and says no packages to uninstall); to remove what it names, pass the "
                "names, or a requirements file (safe-uninstall export writes one)"
            )
        if base.endswith(".py"):
            return self._script(text, name)
        return self._requirements_txt(text, name, (*chain, real), path.parent)

    def _requirements_txt(
        self, text: str, name: str, chain: tuple[str, ...], folder: Path | None = None
    ) -> list[Wanted]:
        wanted: list[Wanted] = []
        for number, line in logical_lines(text):
            origin = f"{name}:{number}"
            option = _LINE_OPTION.match(line)
            if option is None and line.startswith("-"):
                self._check_location(line, origin, folder)
                known = line.split("=", 1)[0].split()[0] in _IGNORED_OPTIONS
                what = "ignored" if known else "not an option uv knows; ignored"
                self.notes.append(f"{origin}: {_shown(line)} {what} (an uninstall reads names)")
            elif option is None:
                wanted.append(self.argument(_without_hashes(line), origin))
            elif option[1] in ("-r", "--requirement"):
                wanted += self._nested(_unquoted(option[2].strip()), chain, folder)
            elif option[1] in ("-e", "--editable"):
                wanted.append(self.argument(_without_hashes(option[2]), origin, editable=True))
            else:  # -c: constraints remove nothing
                self.notes.append(
                    f"{origin}: {_shown(line)} ignored (constraints name nothing to remove)"
                )
        return wanted

    def _check_location(self, line: str, origin: str, folder: Path | None) -> None:
        """An index or find-links location must be an existing path or a URL: uv refuses the
        file otherwise (``-f /nowhere``), even for an uninstall."""
        match = _LOCATION_OPTION.match(line)
        if match is None:
            return
        value = _unquoted(match[2].strip())
        expanded = self._expanded(value)
        base = folder if match[1] in ("-f", "--find-links") and folder is not None else self.cwd
        if _SCHEME.match(expanded) or (base / Path(expanded).expanduser()).exists():
            return
        raise InvalidInput(
            f"{origin}: {match[1]} {_shown(value)} is neither an existing path nor a URL"
        )

    def _nested(self, sub: str, chain: tuple[str, ...], folder: Path | None) -> list[Wanted]:
        """``-r`` inside a file: relative to that file's folder, as uv and pip read it."""
        expanded = self._expanded(sub)
        if folder is None or expanded.startswith(("http://", "https://", "file:")):
            return self.file(expanded, chain)
        return self.file(str(folder / Path(expanded).expanduser()), chain)

    def _script(self, text: str, name: str) -> list[Wanted]:
        block = _script_metadata(text)
        if block is None:
            raise InvalidInput(f"-r {name}: a Python file without inline script metadata")
        return self._listed(_toml(block, name).get("dependencies", []), name, "dependencies")

    def _listed(self, items: object, name: str, key: str) -> list[Wanted]:
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise InvalidInput(f"-r {name}: {key} is not a list of requirements")
        return [self.argument(item, f"{name}: {key}[{i}]") for i, item in enumerate(items)]


def decode_text(data: bytes) -> str:
    """As uv reads a requirements file: a byte-order mark says UTF-8 or UTF-16 (and is no part
    of the text), else it is UTF-8 (a Windows editor's "Unicode" is UTF-16 with a mark).
    Raises UnicodeDecodeError."""
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8) :].decode("utf-8")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16")  # the mark says which order, and goes
    return data.decode("utf-8")


def _read_stdin() -> str:
    try:
        return decode_text(read_fd(0, MAX_FILE_BYTES, name="standard input"))
    except Unusable as err:
        raise InvalidInput(f"-r {err}: not a requirements file") from None
    except UnicodeDecodeError:
        raise InvalidInput("-r -: standard input is not UTF-8 text") from None


def _read_file(path: Path, name: str) -> str:
    """A pipe (``<(cmd)``) or a device is read like a file, up to the same limit: /dev/zero is
    refused after 16 MiB, a FIFO nobody writes to reads as empty instead of blocking."""
    try:
        return decode_text(read_bytes(path, MAX_FILE_BYTES, regular_only=False))
    except Unusable as err:
        raise InvalidInput(f"-r {err}: not a requirements file") from None
    except FileNotFoundError:
        raise InvalidInput(f"-r {name}: file not found") from None
    except OSError as err:
        raise InvalidInput(f"-r {name}: cannot read it: {err.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"-r {name}: not a UTF-8 text file") from None


def _toml(text: str, name: str) -> dict[str, object]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InvalidInput(f"-r {name}: not valid TOML: {err}") from None


def _script_metadata(text: str) -> str | None:
    """The TOML of a PEP 723 ``# /// script`` block, or None."""
    lines = iter(text.splitlines())
    for line in lines:
        if line.strip() == "# /// script":
            break
    else:
        return None
    body: list[str] = []
    for line in lines:
        if line.strip() == "# ///":
            return "\n".join(body)
        body.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    return None


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with comments gone and ``\\`` continuations joined."""
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw if not raw.lstrip().startswith("#") else ""
        line = re.split(r"\s#", line, maxsplit=1)[0]
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            yield start, whole
    if pending.strip():
        yield start, pending.strip()


def _without_hashes(line: str) -> str:
    """A requirement line without its ``--hash=`` (and other per-requirement) options."""
    return re.split(r"\s+--?[A-Za-z]", " " + line, maxsplit=1)[0].strip() if " -" in line else line


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _shown(text: str) -> str:
    """For a message: quoted, and short (a file of one 10 MB line is no reason to print it)."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def satisfies(specifier: SpecifierSet | str, version: str) -> bool:
    """Whether ``version`` is one ``specifier`` allows, pre-releases included. A version or
    specifier that can't be compared is taken as allowed: a requirement names the
    distribution, and a check must not cry wolf over what it can't judge."""
    try:
        wanted = SpecifierSet(specifier) if isinstance(specifier, str) else specifier
        return wanted.contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return True
