import tomllib
from pathlib import Path

import pytest

from backend.llm.base import ModelTraits
from backend.config import DEFAULT_CONFIG_PATH, SETTING_KEYS, ConfigError, env_name, load_config, with_overrides


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mia.toml"
    path.write_text(text)
    return path


def test_repository_default_config_is_valid():
    config = load_config(environ={})
    assert set(config.roles) == {"planner", "executor", "manager", "judge"}
    assert all(role.backend == "llamacpp" for role in config.roles.values())
    assert config.agent.turns_for(ModelTraits(small=False, executor_turns=5)) == 5
    assert config.agent.turns_for(ModelTraits(small=True, executor_turns=8)) == 8
    assert config.resolved_memory_url.startswith("sqlite:///")


def test_roles_can_point_at_their_own_servers(tmp_path):
    path = write(
        tmp_path,
        '[roles.executor]\nbackend = "openai"\nbase_url = "http://127.0.0.1:8000/v1"\nmodel = "exec"\n'
        '[roles.planner]\nbackend = "openai"\nbase_url = "http://127.0.0.1:8001/v1"\nmodel = "plan"\n',
    )
    config = load_config(path, environ={})
    assert config.role("executor").base_url.endswith("8000/v1")
    assert config.role("planner").model == "plan"
    assert config.role("judge").backend == "llamacpp"


def test_the_quote_reader_is_on_by_default_and_can_be_switched_off(tmp_path):
    from backend.episode import EpisodeSettings

    larger = ModelTraits(small=False, executor_turns=4)
    assert EpisodeSettings.from_config(load_config(environ={}), larger).read_by_quote
    off = load_config(write(tmp_path, ""), environ={"MIA_AGENT_READ_BY_QUOTE": "false"})
    assert not EpisodeSettings.from_config(off, larger).read_by_quote
    with pytest.raises(ConfigError, match="agent.read_by_quote"):
        load_config(write(tmp_path, '[agent]\nread_by_quote = "sometimes"\n'), environ={})


def test_environment_overrides_the_file(tmp_path):
    path = write(tmp_path, "[agent]\nmax_turns = 5\n")
    config = load_config(path, environ={"MIA_AGENT_MAX_TURNS": "3", "MIA_JUDGE_MAX_NEW_TOKENS": "64"})
    assert config.agent.max_turns == 3
    assert config.role("judge").max_new_tokens == 64


@pytest.mark.parametrize(
    "text, key",
    [
        ('[roles.planner]\nbackend = "gpt"\n', "roles.planner.backend"),
        ('[roles.planner]\nbackend = "openai"\nmodel = "m"\n', "roles.planner.base_url"),
        ('[roles.planner]\nbackend = "openai"\nbase_url = "http://x/v1"\n', "roles.planner.model"),
        ("[agent]\nmax_turns = -1\n", "agent.max_turns"),
        ('[agent]\nmax_turns = "many"\n', "agent.max_turns"),
        ("[agent]\nturbo = true\n", "agent.turbo"),
        ("[roles.critic]\n", "roles.critic"),
        ("[app]\nport = 0\n", "app.port"),
        ('[app]\ntrusted_proxies = "127.0.0.1, *"\n', "app.trusted_proxies"),
        ("[app]\nupload_cache_bytes = 1000\n", "app.upload_cache_bytes"),
        ("[app]\nupload_cache_age_s = 5\n", "app.upload_cache_age_s"),
        ("[nonsense]\n", "nonsense"),
        ("[agent\n", "mia.toml"),
    ],
)
def test_invalid_config_names_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    assert key in str(info.value)


@pytest.mark.parametrize("text, environ, key, backend", [
    ('[roles.judge]\nbackend = "embedded"\nslots = 2\n', {}, "roles.judge.slots", "embedded"),
    ('[roles.executor]\nbackend = "openai"\nbase_url = "http://x/v1"\nmodel = "m"\nmodel_file = "q.gguf"\n', {},
     "roles.executor.model_file", "openai"),
    ("", {"MIA_PLANNER_BASE_URL": "http://x/v1"}, "roles.planner.base_url (from MIA_PLANNER_BASE_URL)", "llamacpp"),
])
def test_a_key_the_roles_backend_does_not_take_is_refused_with_the_keys_it_takes(tmp_path, text, environ, key, backend):
    from backend.llm.registry import backend_spec

    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ=environ)
    takes = ", ".join(backend_spec(backend).setting_names())
    assert str(info.value).startswith(f"{key}: the {backend} backend does not take {key.split('.')[2].split()[0]}; "
                                      f"it takes {takes} (backend.llm.registry)")


def test_each_backend_takes_its_own_keys_and_every_role_key_belongs_to_one(tmp_path):
    from dataclasses import fields

    from backend.config import RoleConfig
    from backend.llm.registry import BACKENDS, COMMON_SETTINGS

    role_keys = {f.name for f in fields(RoleConfig)}
    declared = {key for spec in BACKENDS.values() for key in spec.settings} | set(COMMON_SETTINGS)
    assert declared == role_keys  # no key in the registry without a field, no field no backend takes
    assert all(meaning for spec in BACKENDS.values() for meaning in spec.settings.values())
    # Each backend's own keys load (the union of them all did before; a file naming them still does).
    for spec in BACKENDS.values():
        given = {"base_url": '"http://127.0.0.1:8000/v1"', "model": '"m"'} if spec.name == "openai" else {}
        lines = "".join(f"{key} = {given.get(key, _default_toml(key))}\n" for key in spec.settings)
        (tmp_path / spec.name).mkdir()
        path = write(tmp_path / spec.name, f'[roles.judge]\nbackend = "{spec.name}"\nmax_new_tokens = 64\n{lines}')
        assert load_config(path, environ={}).role("judge").max_new_tokens == 64


def _default_toml(key: str) -> str:
    from dataclasses import fields

    from backend.config import RoleConfig

    value = next(f.default for f in fields(RoleConfig) if f.name == key)
    return str(value).lower() if isinstance(value, bool) else f'"{value}"' if isinstance(value, str) else str(value)


def test_bad_environment_value_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="agent.reflections"):
        load_config(write(tmp_path, ""), environ={"MIA_AGENT_REFLECTIONS": "lots"})


def test_missing_config_file_named_by_env_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="MIA_CONFIG"):
        load_config(environ={"MIA_CONFIG": str(tmp_path / "absent.toml")})


def test_overrides_are_validated():
    config = load_config(environ={})
    assert with_overrides(config, max_turns=2).agent.max_turns == 2
    with pytest.raises(ConfigError, match="agent.memory_k"):
        with_overrides(config, memory_k=0)


def test_rewards_and_memory_weights_default_to_the_papers():
    from memory_db.scoring import CAPTION_WEIGHT, SIMILARITY_WEIGHT, WIN_RATE_WEIGHT
    from backend.config import MemoryConfig, RewardConfig

    config = load_config(environ={})  # the repository's mia.toml states the defaults
    assert config.rewards == RewardConfig()
    assert (config.rewards.executor.acc_weight, config.rewards.planner.decision_weight) == (0.7, 0.05)
    assert config.memory == MemoryConfig()
    assert (config.memory.similarity_weight, config.memory.win_rate_weight, config.memory.caption_weight) == (
        SIMILARITY_WEIGHT, WIN_RATE_WEIGHT, CAPTION_WEIGHT)


def test_reward_and_memory_sections_are_read_and_overridable(tmp_path):
    path = write(
        tmp_path,
        '[memory]\nurl = "sqlite:///x.sqlite"\nsimilarity_weight = 0.5\nwin_rate_weight = 0.5\n'
        "[rewards.executor]\nacc_weight = 0.6\nmax_answer_chars = 80\n[rewards.planner]\ndecision_weight = 0.1\n",
    )
    config = load_config(path, environ={"MIA_REWARDS_EXECUTOR_TOOL_WEIGHT": "0.3", "MIA_MEMORY_CAPTION_WEIGHT": "0.1"})
    assert config.memory_url == "sqlite:///x.sqlite"
    assert (config.memory.similarity_weight, config.memory.win_rate_weight, config.memory.caption_weight) == (0.5, 0.5, 0.1)
    e = config.rewards.executor
    assert (e.acc_weight, e.tool_weight, e.format_weight, e.max_answer_chars) == (0.6, 0.3, 0.1, 80)
    assert config.rewards.planner.decision_weight == 0.1 and config.rewards.planner.acc_final_weight == 0.7


@pytest.mark.parametrize(
    "text, message",
    [
        ("[rewards.executor]\nacc_weight = -0.1\n", "rewards.executor.acc_weight: must be 0 or more"),
        ("[rewards.planner]\nacc_final_weight = 0\nacc_first_weight = 0\nformat_weight = 0\ndecision_weight = 0\n",
         "rewards.planner: the weights acc_final_weight, acc_first_weight, format_weight, decision_weight are all 0"),
        ("[rewards.executor]\nmax_answer_chars = 0\n", "rewards.executor.max_answer_chars: must be at least 1"),
        ('[rewards.executor]\ntool_weight = "high"\n', "rewards.executor.tool_weight: expected a number"),
        ("[rewards.executor]\nbonus = 1\n", "rewards.executor.bonus: unknown setting"),
        ("[rewards.judge]\n", "rewards.judge: unknown section"),
        ("[memory]\nwin_rate_weight = -1\n", "memory.win_rate_weight: must be 0 or more"),
        ("[memory]\ncaption_weight = 2\n", "memory.caption_weight: must be from 0"),
        ("[memory]\nsimilarity = 1\n", "memory.similarity: unknown setting"),
    ],
)
def test_invalid_weights_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    assert message in str(info.value)


# -- every setting, overridden from the environment ----------------------------------------------
def toml_keys(table: dict, prefix: str = "") -> list[str]:
    """The dotted keys of a TOML file's settings (tables of tables walked)."""
    keys = []
    for name, value in table.items():
        keys += toml_keys(value, f"{prefix}{name}.") if isinstance(value, dict) else [prefix + name]
    return keys


def setting_value(config, key: str):
    if key == "paths.data_dir":
        return str(config.data_dir)
    if key == "memory.url":
        return config.memory_url
    section, name = key.rsplit(".", 1)
    if section.startswith("roles."):
        return getattr(config.roles[section.split(".")[1]], name)
    for part in section.split("."):
        config = getattr(config, part)
    return getattr(config, name)


# Settings that take one of a few words: another valid one (a bad value is any other word).
CHOICES = {"backend": "embedded", "small": "true", "guided_actions": "on", "sparse_memory_planner": "planner",
           "worker": "thread", "weights_dtype": "float32", "trusted_proxies": "127.0.0.9", "plan_shape": "steps",
           "learner": "rft", "selection": "majority", "sampler": "llamacpp",
           "base_url": "http://127.0.0.1:8000/v1"}
FILE_VALUES = load_config(environ={})  # the repository's mia.toml
# What a backend needs besides the key a test sets (backend.llm.registry's validate).
NEEDED = {"openai": {"base_url": "http://127.0.0.1:8000/v1", "model": "served"}}


def with_its_backend(key: str, environ: dict[str, str]) -> dict[str, str]:
    """`environ`, and for a role's key that mia.toml's backend does not take, the role on the first
    backend that takes it (with what that backend needs)."""
    from backend.llm.registry import BACKENDS, backend_spec

    if not key.startswith("roles."):
        return environ
    role, name = key.split(".")[1:]
    if backend_spec(FILE_VALUES.role(role).backend).takes(name):
        return environ
    spec = next(spec for spec in BACKENDS.values() if name in spec.settings)
    needed = {env_name(f"roles.{role}.{k}"): v for k, v in NEEDED.get(spec.name, {}).items() if k != name}
    return {env_name(f"roles.{role}.backend"): spec.name, **needed, **environ}


def another_value(key: str, folder: Path):
    """A valid value of the setting `key` other than mia.toml's: (as text, as the config holds it)."""
    current, name = setting_value(FILE_VALUES, key), key.rsplit(".", 1)[1]
    if key == "paths.data_dir":
        return str(folder), str(folder)
    if isinstance(current, bool):
        return str(not current).lower(), not current
    if isinstance(current, int):
        changed = current - 1 if current > 1 else current + 1
        return str(changed), changed
    if isinstance(current, float):
        changed = round(current - 0.05 if current >= 0.5 else current + 0.05, 4)
        return str(changed), changed
    if isinstance(current, tuple):  # a list of names (agent.tools), comma-separated in a variable
        return "calculate, search", ("calculate", "search")
    text = CHOICES.get(name, "set-by-the-environment")
    return text, text


def bad_value(key: str) -> str | None:
    """A value the setting `key` refuses; None for free text, which any text is."""
    current, name = setting_value(FILE_VALUES, key), key.rsplit(".", 1)[1]
    if key == "paths.data_dir":
        return ""
    if isinstance(current, (bool, int, float)):
        return "not-a-value"
    if isinstance(current, tuple):
        return "search,not-a-tool"
    return "not-a-choice" if name in CHOICES else None


def test_every_setting_of_mia_toml_is_a_known_setting():
    in_file = toml_keys(tomllib.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")))
    assert {"paths.data_dir", "memory.url", "roles.planner.backend", "rewards.executor.acc_weight"} <= set(in_file)
    assert set(in_file) <= set(SETTING_KEYS)


@pytest.mark.parametrize("key", SETTING_KEYS)
def test_each_settings_environment_variable_overrides_the_file(key, tmp_path):
    text, expected = another_value(key, tmp_path)
    assert setting_value(FILE_VALUES, key) != expected
    assert setting_value(load_config(environ=with_its_backend(key, {env_name(key): text})), key) == expected


@pytest.mark.parametrize("key", [key for key in SETTING_KEYS if bad_value(key) is not None])
def test_a_bad_value_from_the_environment_is_an_error_naming_the_key(key):
    with pytest.raises(ConfigError) as info:
        load_config(environ=with_its_backend(key, {env_name(key): bad_value(key)}))
    assert str(info.value).startswith(key) and "does not take" not in str(info.value)


def test_the_data_folder_has_a_short_variable_and_the_two_must_agree(tmp_path):
    assert load_config(environ={"MIA_DATA_DIR": str(tmp_path)}).data_dir == tmp_path
    assert load_config(environ={"MIA_PATHS_DATA_DIR": str(tmp_path)}).data_dir == tmp_path
    with pytest.raises(ConfigError, match="paths.data_dir: MIA_PATHS_DATA_DIR and MIA_DATA_DIR"):
        load_config(environ={"MIA_PATHS_DATA_DIR": str(tmp_path), "MIA_DATA_DIR": str(tmp_path / "other")})


@pytest.mark.parametrize("setting", ["plan_candidates", "quote_check", "unverified_memory_weight"])
def test_a_removed_variant_is_refused_with_where_it_went(tmp_path, setting):
    path = tmp_path / "mia.toml"
    path.write_text(f"[agent]\n{setting} = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"agent.{setting}: a variant that was measured.*commit f8918e4.*remove the setting"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match=f"agent.{setting} \\(from MIA_AGENT_{setting.upper()}\\): a variant"):
        load_config(environ={f"MIA_AGENT_{setting.upper()}": "1"})
