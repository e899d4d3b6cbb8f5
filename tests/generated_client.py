"""A Python client generated with ``openapi-python-client`` from an OpenAPI schema as a server
served it, and its operations called as the generated package's users call them. Shared by the
in-process test (tests/api/test_generated_client.py) and the test against the production recipe
(tests/scaleout/test_agent_clients.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@contextmanager
def generated_package(schema: str, folder: Path, package: str) -> Iterator[ModuleType]:
    """The client package ``package`` generated from the schema text into ``folder``, importable
    inside the block (a generator warning, e.g. a schema it skipped, fails: nothing may be lost).
    Each caller names its own package, so two generated clients can live in one process."""
    path = folder / "openapi.json"
    path.write_text(schema, encoding="utf-8")
    config = folder / "config.yaml"
    config.write_text(f"package_name_override: {package}\npost_hooks: []\n", encoding="utf-8")
    done = subprocess.run(  # noqa: S603 - the pinned generator, fixed arguments
        [
            str(GENERATOR),
            "generate",
            *("--path", str(path), "--output-path", str(folder / package)),
            *("--meta", "none", "--config", str(config)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(package)
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.partition(".")[0] == package]:
            del sys.modules[name]


class Generated:
    """A generated package's operations, called through its ``AuthenticatedClient`` with an
    agent's token (``httpx_args`` chooses the transport: real HTTP unless told)."""

    def __init__(self, package: ModuleType, base_url: str, token: str, **httpx_args: Any) -> None:
        self.package = package
        self.client = package.AuthenticatedClient(
            base_url=base_url, token=token, timeout=httpx.Timeout(120.0), httpx_args=httpx_args
        )

    def call(self, tag: str, operation: str, *args: Any, body: Any = None, **kwargs: Any) -> Any:
        name = f"{self.package.__name__}.api.{tag}.agentapi_api_{operation}"
        if body is not None:
            kwargs["body"] = body
        return importlib.import_module(name).sync_detailed(*args, client=self.client, **kwargs)

    def close(self) -> None:
        self.client.get_httpx_client().close()

    def model(self, name: str, data: dict[str, Any]) -> Any:
        models = importlib.import_module(f"{self.package.__name__}.models")
        return getattr(models, name).from_dict(data)


def answer(response: Any) -> tuple[int, Any]:
    """A generated response as the status and the JSON its parsed model writes back."""
    assert response.parsed is not None, response.content
    return int(response.status_code), response.parsed.to_dict()
