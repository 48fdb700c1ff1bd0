"""Offline training and the verl recipe build their tools from agent.tools, as the app does
(backend/tools/registry.py): a tool taken out of the list is neither built nor named in a prompt."""

from __future__ import annotations

import pytest

from backend.config import DEFAULT_TOOLS
from backend.tools.image_index import demo_images_dir
from training.datasets import RLRecord
from training.grpo_config import TrainingConfigError, settings_from_mapping
from training.trainer import stage_tools
from training.verl_recipe.data import verl_row

from .conftest import TEST_CACHE

IMAGES = ["image_search"] if demo_images_dir() else []
RECORD = RLRecord("When did the Russian Civil War end?", "October 1922", "hotpotqa:x", "Successful strategies: none found.",
                  "1. Search the war\n2. Find the end date", ["Search the war", "Find the end date"])


def settings(tools: list[str] | None = None):
    agent = {"guided_actions": "on"} | ({"tools": tools} if tools is not None else {})
    return settings_from_mapping({"cache_dir": str(TEST_CACHE), "agent": agent})


def test_the_trainer_builds_the_yamls_agent_tools_without_web_access():
    assert settings().agent.tools == DEFAULT_TOOLS
    assert list(stage_tools(settings())) == ["search", *IMAGES]  # what the trainer built before the list
    assert list(stage_tools(settings(["calculate", "search"]))) == ["calculate", "search"]
    assert list(stage_tools(settings(["search"]))) == ["search"]


def test_an_unknown_tool_in_a_training_yaml_is_refused_with_the_known_names():
    with pytest.raises(TrainingConfigError, match="config: agent.tools: unknown tool 'wiki'; known tools are search, "
                                                  "web_search, visit, image_search, calculate"):
        settings(["wiki"])


def test_verl_rows_name_and_carry_the_listed_tools():
    default = verl_row(RECORD, "executor")
    system = default["prompt"][0]["content"]
    assert "- search:" in system and "- calculate:" not in system
    assert default["extra_info"]["tools"] == list(DEFAULT_TOOLS)
    listed = verl_row(RECORD, "executor", ["calculate"])
    system = listed["prompt"][0]["content"]
    assert "- calculate:" in system and "- search:" not in system
    assert listed["extra_info"]["tools"] == ["calculate"]
