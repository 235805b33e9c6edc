"""The release, one push away: the workflow files as GitHub reads them.

CI's release step (``.ci/run``) checks them against GitHub's schema (check-jsonschema's
``vendor.github-workflows``) and with zizmor's offline audits, and builds, checks and installs
the wheel; here, what those tools do not know: that a version tag publishes the package with
trusted publishing and no token, and the site with it, from what the repository declares.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")  # the docs extra

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def _workflow(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    loaded["on"] = loaded.pop(True, loaded.get("on"))
    return loaded


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_each_workflow_grants_least_and_keeps_no_credential(name: str) -> None:
    workflow = _workflow(name)
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    # Permissions are granted per job, never write at the workflow's level.
    assert "permissions" in workflow
    assert "write" not in str(workflow["permissions"])
    # No token or password is kept in the repository's settings for these workflows.
    assert "secrets." not in text
    for step in _steps(workflow):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, name


def test_a_version_tag_publishes_the_package_with_trusted_publishing() -> None:
    release = _workflow("release.yml")
    assert release["on"] == {"push": {"tags": ["v*"]}}
    publish = release["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    (uploader,) = [s for s in publish["steps"] if "gh-action-pypi-publish" in s.get("uses", "")]
    assert "with" not in uploader  # no password, no token: the job's identity token
    build = "\n".join(step.get("run", "") for step in release["jobs"]["build"]["steps"])
    for check in (
        "python -m build",
        "twine check --strict",
        "CHANGELOG.md",
        "embedding-equivalence --version",
    ):
        assert check in build, check


def test_the_same_tag_publishes_the_site() -> None:
    docs = _workflow("docs.yml")
    assert docs["on"]["push"] == {"tags": ["v*"]}
    assert docs["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert docs["jobs"]["build"]["permissions"] == {"contents": "read"}


def test_the_workflows_install_extras_that_exist() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([a-z][a-z0-9-]*) = \[", table, flags=re.MULTILINE))
    assert {"dev", "docs", "test"} <= extras
    for path in WORKFLOWS.glob("*.yml"):
        for requested in re.findall(r'-e "\.\[([^\]]+)\]"', path.read_text(encoding="utf-8")):
            assert set(requested.split(",")) <= extras, (path.name, requested)
