"""The compiled Patricia trie (`pubsub/skipring/_ctrie.pyx`, issue 11); everything else about
the package is in pyproject.toml.  The extension is optional: where it cannot be built (no C
compiler) the install goes on and `pubsub.skipring.trie` uses the Python reference, which
`make test` reports (tests/skipring/test_ctrie.py)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("pubsub.skipring._ctrie", ["pubsub/skipring/_ctrie.pyx"], optional=True)],
        language_level=3,
        quiet=True,
    )
)
