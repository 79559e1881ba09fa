"""Build the Cython extensions; everything else is declared in pyproject.toml."""

from __future__ import annotations

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

extensions = [
    Extension(
        "tdmcore._kernels._snapshot",
        ["src/tdmcore/_kernels/_snapshot.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
    # the controller's regulation rule (regulation.pxd), for Python callers; the
    # event engine compiles the same inline functions into its loop
    Extension(
        "tdmcore._kernels.regulation",
        ["src/tdmcore/_kernels/regulation.pyx"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
    # the flow model's event engine: C speed for many small steps on shared state
    Extension(
        "tdmcore.sim.engine._flow",
        ["src/tdmcore/sim/engine/_flow.pyx"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
]

# Two roots: the library under src/, the Kubernetes bridge at the top level (the
# project's fixed shape).  Declared here because pyproject's find cannot map both.
packages = find_packages("src") + find_packages(".", include=["k8s_bridge", "k8s_bridge.*"])

setup(
    packages=packages,
    package_dir={"": "src", "k8s_bridge": "k8s_bridge"},
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
