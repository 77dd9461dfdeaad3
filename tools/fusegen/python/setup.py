"""The fusegen wheel's tag and contents (pyproject.toml has its metadata): the executable in
fusegen/bin/ is for this platform and any Python 3, so the wheel is py3-none-<platform>, as the
cmake and ninja wheels are. scripts/build_wheel.sh stages bin/ and templates/ and sets
FUSEGEN_VERSION."""
import os
import sysconfig

from setuptools import setup

setup(
    version=os.environ["FUSEGEN_VERSION"],
    packages=["fusegen"],
    package_data={"fusegen": ["bin/fusegen", "templates/**/*", "templates/*"]},
    include_package_data=False,
    zip_safe=False,
    options={"bdist_wheel": {"plat_name": sysconfig.get_platform().replace("-", "_").replace(".", "_"),
                             "python_tag": "py3"}},
)
