"""Build the optional compiled record scanner, encoder and decoder; without a C compiler the pure-Python
twins are used."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("rivven_kproto.codec.records._scan", ["rivven_kproto/codec/records/_scan.c"], optional=True),
        Extension("rivven_kproto.codec.records._encode", ["rivven_kproto/codec/records/_encode.c"], optional=True),
        Extension("rivven_kproto.codec.records._decode", ["rivven_kproto/codec/records/_decode.c"], optional=True),
    ],
)
