"""Coverage-guided fuzzing of the frame decoder, the wire codec and every core's `handle`.

`make fuzz` runs every target under atheris (libFuzzer for Python) with a fixed number of
inputs each and prints, per target, the inputs run, the seconds taken and the crashes found;
`python -m fuzz --help` tells how to run one target longer.  `tests/test_fuzz.py` runs every
target briefly inside `make test`.

* `fuzz.source`   turns the fuzzer's bytes into decisions (numbers, choices, strings);
* `fuzz.shapes`   builds wire bodies of every registered message kind from those decisions
                  and decodes them with the real codec, so the cores get decoded messages;
* `fuzz.checks`   the invariants: every effect a core returns is encodable and decodes back
                  to itself, a Patricia trie's hashes agree with its contents, ...;
* `fuzz.targets`  one function per target, ``target(data: bytes) -> int``, which raises on a
                  crash or a broken invariant and returns the number of messages it handled;
* `fuzz.__main__` the driver (atheris in one child process per target).

Nothing here is imported by the project itself; this package is a development tool, like
`bench`.
"""
