from pathlib import Path

import pytest

from backend.llm.base import ModelTraits
from backend.config import ConfigError, load_config, with_overrides


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
        ("[nonsense]\n", "nonsense"),
        ("[agent\n", "mia.toml"),
    ],
)
def test_invalid_config_names_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    assert key in str(info.value)


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
