"""Print the corpus's table of fused families: library, family, how many the models build,
how many fusion fused (``python -m tests.corpus.family_table``, from the checkout's root)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    from tests.helpers.corpus_counts import format_table, table_rows
    from tests.models.library_models import build_all

    with tempfile.TemporaryDirectory() as directory:
        print(format_table(table_rows(build_all(Path(directory)))))


if __name__ == "__main__":
    main()
