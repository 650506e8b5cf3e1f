"""The build's one part that pyproject.toml cannot declare: the graph core's C extensions.

Each is built from one ``_*.c`` source in ``scopefusion/core/graph/native/`` (and the helpers they
share, ``common.h`` and ``wire.h``) with this machine's C compiler.  They are optional: where one cannot be built
(no compiler, no Python headers), the install goes on without it and
:mod:`scopefusion.core.graph.native` uses the pure-Python path, which gives the same results.
"""
from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("scopefusion/core/graph/native")


def extensions() -> list[Extension]:
    return [
        Extension(f"scopefusion.core.graph.native.{source.stem}", [str(source)], optional=True,
                  depends=[str(header) for header in sorted(NATIVE.glob("*.h"))], extra_compile_args=["-O2"])
        for source in sorted(NATIVE.glob("_*.c"))
    ]


setup(ext_modules=extensions())
