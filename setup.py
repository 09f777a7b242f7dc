"""Build the optional compiled record scanner; without a C compiler the pure-Python one is used."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("rivven_kproto.codec.records._scan", ["rivven_kproto/codec/records/_scan.c"], optional=True),
    ],
)
