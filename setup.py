"""The compiled parts (issue 11): the Patricia trie (`pubsub/skipring/_ctrie.pyx`) and the hot
path's decoders (`pubsub/skipring/_chotpath.pyx`); everything else about the package is in
pyproject.toml.  Both extensions are optional: where they cannot be built (no C compiler) the
install goes on and `pubsub.skipring.trie` and `pubsub.skipring.hotpath` use their Python
references, which `make test` reports (tests/skipring/test_ctrie.py, test_hotpath.py)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension("pubsub.skipring._ctrie", ["pubsub/skipring/_ctrie.pyx"], optional=True),
            Extension("pubsub.skipring._chotpath", ["pubsub/skipring/_chotpath.pyx"], optional=True),
        ],
        language_level=3,
        quiet=True,
    )
)
