"""The compiled parts (issue 11): the Patricia trie (`pubsub/publications/_ctrie.pyx`) and the hot
path's decoders (`pubsub/publications/_chotpath.pyx`); everything else about the package is in
pyproject.toml.  Both extensions are optional: where they cannot be built (no C compiler) the
install goes on and `pubsub.publications.trie` and `pubsub.publications.hotpath` use their Python
references, which `make test` reports (tests/publications/test_ctrie.py, test_hotpath.py)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension("pubsub.publications._ctrie", ["pubsub/publications/_ctrie.pyx"], optional=True),
            Extension("pubsub.publications._chotpath", ["pubsub/publications/_chotpath.pyx"], optional=True),
        ],
        language_level=3,
        quiet=True,
    )
)
