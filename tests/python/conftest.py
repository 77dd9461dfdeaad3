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
