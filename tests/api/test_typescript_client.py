"""TypeScript types generated from the served OpenAPI schema by ``openapi-typescript`` accept the
README's request bodies and refuse wrong ones (issue 41.5): an argument with a default (the
search's ``limit``) is optional in the request's type, as the schema means it.

``openapi-typescript`` and ``typescript`` are pinned by ``tests/api/typescript_client/`` and
installed with ``npm ci`` into ``var/typescript-client/`` the first time (Node.js, npm and the
npm registry are needed then)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from tests.helpers import ROOT, made_once

PINNED = Path(__file__).with_name("typescript_client")
EXAMPLES = "readme_examples.ts"


def _installed() -> Path:
    """The pinned generator and compiler, installed once per lock file."""
    lock = (PINNED / "package-lock.json").read_bytes()
    home = ROOT / "var" / "typescript-client" / hashlib.sha256(lock).hexdigest()[:16]
    home.mkdir(parents=True, exist_ok=True)

    def install(building: Path) -> None:
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed to install openapi-typescript"
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PINNED / name, home / name)
        done = subprocess.run(  # noqa: S603 - npm ci of a pinned lock file
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        building.write_text("installed\n", encoding="utf-8")

    made_once(home / "installed", install)
    return home


def _node(home: Path, tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for openapi-typescript and tsc"
    script = home / "node_modules" / ".bin" / tool
    return subprocess.run(  # noqa: S603 - node with fixed arguments
        [node, str(script.resolve()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.django_db
def test_the_readme_bodies_type_check_against_the_generated_types(
    client: Client, tmp_path: Path
) -> None:
    home = _installed()
    served = client.get("/api/v1/openapi.json")
    assert served.status_code == 200
    (tmp_path / "openapi.json").write_bytes(served.content)
    generated = _node(home, "openapi-typescript", "openapi.json", "-o", "api.d.ts", cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr + generated.stdout
    shutil.copyfile(PINNED / EXAMPLES, tmp_path / EXAMPLES)
    checked = _node(
        home,
        "tsc",
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--module",
        "es2022",
        "--moduleResolution",
        "bundler",
        EXAMPLES,
        cwd=tmp_path,
    )
    # Every README body compiles, and every wrong one (``@ts-expect-error``) is refused.
    assert checked.returncode == 0, checked.stdout + checked.stderr
