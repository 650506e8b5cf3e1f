"""The corpus is built once per session: in-process builders, then the two builder processes."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def library_corpus(tmp_path_factory):
    from tests.models.library_models import build_all

    return build_all(tmp_path_factory.mktemp("library-graphs"))
