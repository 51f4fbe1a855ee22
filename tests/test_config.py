"""Configuration: four places and their precedence, validation that names the key and the file,
and the real command reading them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import filelock
import pytest

from safeuninstall import config
from safeuninstall import options as core_options
from safeuninstall.base.errors import UsageError
from safeuninstall.cli.commands import cli
from safeuninstall.probe.runner import DEFAULT_TIMEOUT, ProbeSettings, probes_from
from safeuninstall.state.store import Store
from tests.conftest import UV, MakeVenv, run_tool
from tests.test_uninstall import corrupt_stash

needs_uv = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


class Places:
    """A project folder (with a sub folder to run in) and a user config home."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        self.cwd = self.project / "sub"
        self.cwd.mkdir(parents=True)
        self.config_home = root / "xdg"
        self.environ: dict[str, str] = {"XDG_CONFIG_HOME": str(self.config_home)}

    def project_file(self, body: str) -> Path:
        path = self.project / "pyproject.toml"
        path.write_text(f"[project]\nname = 'x'\n\n[tool.safe-uninstall]\n{body}")
        return path

    def user_file(self, body: str) -> Path:
        path = self.config_home / "safe-uninstall" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        return path

    def resolve(self, **cli: config.Value) -> config.Settings:
        typed = {name.replace("_", "-"): value for name, value in cli.items()}
        return config.resolve(self.cwd, self.environ, typed)

    def probes(self, **cli: config.Value) -> ProbeSettings:
        """The probes as a command settles them (cli.Common.probe_settings)."""
        return probes_from(self.resolve(**cli), disabled=False, cwd=self.cwd)


@pytest.fixture
def places(tmp_path: Path) -> Places:
    return Places(tmp_path)


# (key, TOML text, typed value, environment text): one sample per key, each unlike its default
SAMPLES = [
    ("probe-timeout", "12.5", 12.5, "12.5"),
    ("lock-timeout", "0", 0.0, "0"),
    ("offline", "true", True, "yes"),
    ("color", '"never"', "never", "never"),
    ("state-dir", '"/srv/state"', "/srv/state", "/srv/state"),
]


@pytest.mark.parametrize(("key", "toml", "value", "env_text"), SAMPLES)
def test_each_place_and_its_precedence(
    places: Places, key: str, toml: str, value: config.Value, env_text: str
) -> None:
    name = config.KEYS[config.KEY_NAMES.index(key)]
    assert places.resolve().by_key[key].origin == config.DEFAULT
    assert places.resolve().value(key) == name.default != value

    user = places.user_file(f"{key} = {toml}\n")
    assert places.resolve().by_key[key] == config.Setting(name, value, str(user))

    project = places.project_file(f"{key} = {toml}\n")
    assert places.resolve().by_key[key].origin == f"{project} [tool.safe-uninstall]"

    places.environ[name.env] = env_text
    assert places.resolve().by_key[key] == config.Setting(name, value, name.env)

    typed = places.resolve(**{key.replace("-", "_"): value})
    assert typed.by_key[key] == config.Setting(name, value, config.COMMAND_LINE)


def test_probe_and_probe_cmd_come_together_from_the_strongest_place(places: Places) -> None:
    places.user_file('probe-cmd = "tool --check"\n')
    places.project_file('probe = ["import a", "import b"]\n')
    settings = places.resolve()
    assert settings.strings("probe") == ("import a", "import b")
    assert settings.strings("probe-cmd") == ()  # the user's half is not mixed in
    assert "pyproject.toml" in settings.by_key["probe-cmd"].origin
    places.environ["SAFE_UNINSTALL_PROBE_CMD"] = "other"
    settings = places.resolve()
    assert settings.strings("probe") == ()
    assert settings.strings("probe-cmd") == ("other",)


def test_the_probes_of_a_command_read_the_user_file(places: Places) -> None:
    user = places.user_file('probe = "import json"\nprobe-timeout = 9\n')
    probes = places.probes()
    assert [(p.code, p.origin) for p in probes.probes] == [("import json", str(user))]
    assert probes.timeout == 9.0
    places.project_file('probe-cmd = "true"\n')
    probes = places.probes()
    assert [p.code for p in probes.probes] == ["true"]
    assert probes.timeout == 9.0  # the timeout is its own key: still the user's
    typed = places.probes(probe=("import os",), probe_timeout=1.0)
    assert [(p.code, p.origin) for p in typed.probes] == [("import os", "--probe")]
    assert typed.timeout == 1.0


def test_probes_are_what_the_config_command_shows(places: Places) -> None:
    """One resolver: an empty list in a stronger place hides a weaker place's probes for the
    probe path as well, and a probe from a variable is named by the variable."""
    places.user_file('probe = "import json"\n')
    places.project_file("probe = []\n")
    assert places.resolve().strings("probe") == ()
    assert places.probes().probes == ()
    places.environ["SAFE_UNINSTALL_PROBE_CMD"] = "true"
    (probe,) = places.probes().probes
    assert probe.origin == places.resolve().by_key["probe-cmd"].origin == "SAFE_UNINSTALL_PROBE_CMD"


def test_relative_state_dir_is_relative_to_its_file(places: Places) -> None:
    places.project_file('state-dir = "../state"\n')
    assert places.resolve().text("state-dir") == str(places.project / ".." / "state")
    places.environ["SAFE_UNINSTALL_STATE_DIR"] = "rel"
    assert places.resolve().text("state-dir") == "rel"  # as typed: relative to the cwd


def test_user_file_location(tmp_path: Path) -> None:
    assert config.user_config_path({"XDG_CONFIG_HOME": "/cfg", "HOME": "/h"}) == Path(
        "/cfg/safe-uninstall/config.toml"
    )
    # The XDG spec: a relative XDG_CONFIG_HOME is invalid and ignored.
    for xdg in ("relative/cfg", ""):
        assert config.user_config_path({"XDG_CONFIG_HOME": xdg, "HOME": "/h"}) == Path(
            "/h/.config/safe-uninstall/config.toml"
        )


@pytest.mark.parametrize(
    ("where", "body", "message"),
    [
        ("project", "probes = 'x'\n", "unknown key 'probes' in [tool.safe-uninstall]"),
        ("user", "lock_timeout = 3\n", "unknown key 'lock_timeout'"),
        ("user", "offline = 'yes'\n", "offline must be a true or false, not 'yes'"),
        ("project", "color = 'sometimes'\n", 'color must be a "auto" | "always" | "never"'),
        ("project", "probe-timeout = 0\n", "probe-timeout must be a positive number"),
        ("user", "lock-timeout = -1\n", "lock-timeout must be a zero or positive number"),
        ("user", "lock-timeout = true\n", "lock-timeout must be a number of seconds, >= 0"),
        ("project", "probe = [1]\n", "probe must be a string or array of strings"),
        ("user", "state-dir = ''\n", "state-dir must be a path"),
        ("user", "offline = tru\n", "cannot read it"),
    ],
)
def test_a_bad_file_names_the_key_and_the_file(
    places: Places, where: str, body: str, message: str
) -> None:
    path = places.project_file(body) if where == "project" else places.user_file(body)
    with pytest.raises(UsageError) as raised:
        places.resolve()
    assert raised.value.exit_code == 2
    assert raised.value.message.startswith(str(path))
    assert message in raised.value.message
    # The probe path reads the same files and fails the same way.
    with pytest.raises(UsageError, match="^" + str(path)):
        places.probes()


@pytest.mark.parametrize(
    ("variable", "text", "message"),
    [
        ("SAFE_UNINSTALL_OFFLINE", "maybe", "SAFE_UNINSTALL_OFFLINE must be one of 1, true"),
        ("SAFE_UNINSTALL_LOCK_TIMEOUT", "soon", "SAFE_UNINSTALL_LOCK_TIMEOUT must be a number"),
        ("SAFE_UNINSTALL_PROBE_TIMEOUT", "0", "probe-timeout must be a positive number"),
        ("SAFE_UNINSTALL_COLOR", "blue", "SAFE_UNINSTALL_COLOR must be one of auto, always"),
    ],
)
def test_a_bad_variable_is_named(places: Places, variable: str, text: str, message: str) -> None:
    places.environ[variable] = text
    with pytest.raises(UsageError, match=variable) as raised:
        places.resolve()
    assert message in raised.value.message


def test_empty_variable_is_unset_and_unknown_ones_are_listed(places: Places) -> None:
    places.environ.update(SAFE_UNINSTALL_OFFLINE="", SAFE_UNINSTALL_PROBES="import x")
    settings = places.resolve()
    assert settings.by_key["offline"].origin == config.DEFAULT
    assert settings.strings("probe") == ()
    assert settings.ignored_variables == ("SAFE_UNINSTALL_PROBES",)


def test_every_key_is_an_option_of_uninstall_with_the_same_default() -> None:
    """Keys and options must not drift apart: the same names, the documented defaults. The
    retention keys have no option: they say where the command line sets a bound once."""
    command = cli.get_command(click.Context(cli), "uninstall")
    assert command is not None
    options = {opt for param in command.params for opt in getattr(param, "opts", ())}
    assert {key.option for key in config.KEYS if key.command_line is None} <= options
    assert {key.name for key in config.KEYS if key.command_line} == {"keep", "max-size"}
    defaults = {key.name: key.default for key in config.KEYS}
    assert defaults["probe-timeout"] == DEFAULT_TIMEOUT
    assert defaults["lock-timeout"] == core_options.TargetOptions(None, Path(), {}).lock_timeout
    assert defaults["color"] == "auto"


# -- the real command -------------------------------------------------------------------------


def test_config_command_shows_values_and_origins(places: Places) -> None:
    user = places.user_file('offline = true\ncolor = "never"\n')
    project = places.project_file("lock-timeout = 5\n")
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(places.config_home),
        "SAFE_UNINSTALL_PROBE": "import json",
    }

    shown = run_tool("config", "--json", cwd=places.cwd, env=env).json()

    settings = shown["settings"]
    assert isinstance(settings, dict)
    assert settings["offline"] == {"value": True, "origin": str(user), "env": config.KEYS[5].env}
    assert settings["lock-timeout"]["origin"] == f"{project} [tool.safe-uninstall]"
    assert settings["lock-timeout"]["value"] == 5.0
    assert settings["probe"] == {
        "value": ["import json"],
        "origin": "SAFE_UNINSTALL_PROBE",
        "env": "SAFE_UNINSTALL_PROBE",
    }
    assert settings["probe-timeout"] == {
        "value": 300.0,
        "origin": "default",
        "env": "SAFE_UNINSTALL_PROBE_TIMEOUT",
    }
    assert shown["files"] == {"project": str(project), "user": str(user), "user_exists": True}

    text = run_tool("config", "-v", "--color", "always", cwd=places.cwd, env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert f'color         = "always"{" " * 26} # command line' in lines
    assert any(line.startswith("offline       = true") and str(user) in line for line in lines)
    assert f"project file: {project}" in lines
    quiet = run_tool("config", "-q", cwd=places.cwd, env=env)
    assert quiet.stdout.splitlines() == [
        'probe = ["import json"]',
        "probe-timeout = 300.0",
        "lock-timeout = 5.0",
        "offline = true",
        "keep = 10",
        "max-size = 2147483648",
        'color = "never"',
    ]


@needs_uv
def test_a_bad_user_file_fails_every_command_with_exit_2(
    make_venv: MakeVenv, places: Places
) -> None:
    venv = make_venv("leftpad")
    path = places.user_file("probe_cmd = 'x'\n")
    env = {"XDG_CONFIG_HOME": str(places.config_home)}
    for args in (["snapshots"], ["--no-probe", "leftpad"], ["rollback"], ["probe"]):
        run = venv.tool(*args, cwd=places.cwd, **env)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert f"error: {path}: unknown key 'probe_cmd'" in run.stderr
    shown = run_tool("config", cwd=places.cwd, env={**os.environ, **env})
    assert shown.returncode == 2
    assert f"error: {path}: unknown key 'probe_cmd'" in shown.stderr
    as_json = venv.tool("--json", "leftpad", cwd=places.cwd, **env)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"].startswith(f"{path}: unknown key 'probe_cmd'")
    assert "leftpad" in venv.installed()


@needs_uv
def test_state_dir_and_lock_timeout_from_the_project_file(
    make_venv: MakeVenv, places: Places
) -> None:
    venv = make_venv("leftpad")
    places.project_file('state-dir = "../state"\nlock-timeout = 0.2\n')
    state = places.project / ".." / "state"

    taken = venv.tool("snapshot", "--no-stash", cwd=places.cwd)
    assert taken.returncode == 0, taken.stderr
    assert Store(state).folder("0001").snapshot_file.is_file()
    assert not (venv.root / ".safe-uninstall").exists()

    with filelock.FileLock(str(state / "lock")):
        busy = venv.tool("--no-probe", "leftpad", cwd=places.cwd)
        typed = venv.tool("--no-probe", "--lock-timeout", "0", "leftpad", cwd=places.cwd)
    assert busy.returncode == 1
    assert "still held after 0.2 s" in busy.stderr
    assert "still held after 0 s" in typed.stderr  # the command line wins over the file
    assert "leftpad" in venv.installed()


@needs_uv
def test_offline_from_the_user_file_and_no_offline_on_the_command_line(
    make_venv: MakeVenv, places: Places
) -> None:
    venv = make_venv("leftpad")
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    corrupt_stash(venv, "leftpad")  # so the rollback must reinstall, and can't: no index
    places.user_file("offline = true\n")
    env = {"XDG_CONFIG_HOME": str(places.config_home)}

    configured = venv.tool("rollback", "1", "--json", cwd=places.cwd, **env).json()
    typed = venv.tool("rollback", "1", "--json", "--no-offline", cwd=places.cwd, **env).json()

    # Refused before any change: the installer's dry run of the reinstall fails (no index).
    assert configured["exit_code"] == typed["exit_code"] == 1
    assert "--offline" in _dry_run_line(configured)
    assert "--offline" not in _dry_run_line(typed)


def _dry_run_line(result: dict[str, object]) -> str:
    """The installer's command line the refusal quotes."""
    error = result["error"]
    assert isinstance(error, str) and "--dry-run" in error
    return error


def test_config_takes_the_target_options_and_names_that_environment(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """``config -p ENV`` as every other command takes it: the settings, and the environment
    and state folder its commands use; nothing written there."""
    from tests.conftest import changed, tree
    from tests.test_json_contract import problems

    venv = make_venv()
    before = tree(venv.root)

    shown = run_tool("config", "-p", str(venv.root), cwd=tmp_path)
    data = run_tool("config", "-p", str(venv.root), "--json", cwd=tmp_path)
    plain = run_tool("config", "--json", cwd=tmp_path)

    assert shown.returncode == data.returncode == plain.returncode == 0, shown.stderr
    assert f"environment: {venv.python}" in shown.stdout.splitlines()
    assert f"state folder: {venv.root / '.safe-uninstall'}" in shown.stdout.splitlines()
    assert data.json()["environment"] == str(venv.python)
    assert data.json()["state_dir"] == str(venv.root / ".safe-uninstall")
    assert problems("config", data.json()) == []
    assert plain.json()["environment"] is None
    assert changed(before, tree(venv.root)) == []
