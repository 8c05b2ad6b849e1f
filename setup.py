"""Build configuration beyond pyproject.toml: the optional C kernel ``agentlog._native``.

``optional=True``: without a C compiler the install still succeeds and agentlog computes
the same noise words with numpy (``agentlog._noise``), only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("agentlog._native", ["agentlog/_native.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
