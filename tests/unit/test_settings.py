from __future__ import annotations

from pathlib import Path

import pytest

from approvals.errors import ConfigurationError
from web.settings import Settings


def test_graph_entries_come_from_the_file_then_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "approvals.toml"
    config.write_text('[graphs]\nmine = "pkg.mod:build"\nother = "a:b"\n')
    settings = Settings(config_file=config, graphs={"other": "c:d"})
    assert settings.graph_entries() == {"mine": "pkg.mod:build", "other": "c:d"}


@pytest.mark.parametrize("text", ["[graphs\n", "[graphs]\nx = 3\n", "graphs = 1\n"])
def test_a_bad_config_file_is_refused_with_its_name(tmp_path: Path, text: str) -> None:
    config = tmp_path / "approvals.toml"
    config.write_text(text)
    with pytest.raises(ConfigurationError, match=r"approvals\.toml"):
        Settings(config_file=config).graph_entries()
