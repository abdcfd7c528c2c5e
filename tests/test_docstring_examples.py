"""Every runnable example in medhelm_core's docstrings gives the output it shows (those needing a database are
marked ``+SKIP``), so the documentation cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import medhelm_core

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(medhelm_core.__path__, "medhelm_core.")
    if ".migrations" not in name and name != "medhelm_core.__main__"
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (see the output above)"
