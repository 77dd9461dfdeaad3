"""The tests of fusegen's Python API build into a cache of their own, shared by the session
(the runtime's objects compile once), not the user's ~/.cache/fusegen."""
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def cache(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fusegen-cache"))
    old = os.environ.get("FUSEGEN_CACHE_DIR")
    os.environ["FUSEGEN_CACHE_DIR"] = path
    yield path
    if old is None:
        del os.environ["FUSEGEN_CACHE_DIR"]
    else:
        os.environ["FUSEGEN_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def load_specs(tmp_path_factory):
    """load_specs({op: spec text}, package name, cpu_only=True): the specs written to files and
    built into one package (fusegen.load); returns the package's name."""
    import fusegen

    def load(specs, name, cpu_only=True):
        d = tmp_path_factory.mktemp("specs")
        paths = []
        for op, text in specs.items():
            paths.append(d / f"{op}.yaml")
            paths[-1].write_text(text)
        return fusegen.load(paths, name=name, cpu_only=cpu_only).__name__
    return load
