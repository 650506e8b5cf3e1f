"""TF Model Garden (``official``) for the tests that build its models: fixture
``model_garden_site`` (a pytest plugin of ``tests/conftest.py``).

Its declared requirements pin an older TensorFlow, so it is installed ``--no-deps`` into a
directory of its own, once per session, and put on ``sys.path``.
"""
from __future__ import annotations

import pytest

MODEL_GARDEN = ("tf-models-official==2.20.0", "gin-config==0.5.0")


@pytest.fixture(scope="session")
def model_garden_site(tmp_path_factory) -> str:
    """The directory Model Garden was installed into ("" when it was importable already)."""
    import subprocess
    import sys

    try:
        import official.nlp.modeling.networks  # noqa: F401  (already installed)
        return ""
    except ImportError:
        pass
    target = tmp_path_factory.mktemp("model-garden")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
           "--target", str(target), *MODEL_GARDEN]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"pip install {' '.join(MODEL_GARDEN)} failed:\n{proc.stderr}"
    sys.path.insert(0, str(target))
    return str(target)
