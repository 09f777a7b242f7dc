"""The declarative schema layer: Kafka message declarations on top of ``construct``."""

from .fields import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ZERO_UUID,
    Array,
    FieldSpec,
    KafkaType,
    kf,
)
from .primitives import CachedArray
from .struct import (
    REQUESTS,
    RESPONSES,
    DecodeError,
    EncodeError,
    Header,
    Message,
    Request,
    Response,
    Struct,
    UnsupportedVersionError,
    kafka_message,
    kafka_struct,
)
from .versions import Versions

__all__ = [
    "BOOL", "BYTES", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "RECORDS", "STRING", "UINT16",
    "UINT32", "UUID", "ZERO_UUID", "Array", "FieldSpec", "KafkaType", "kf", "REQUESTS", "RESPONSES",
    "DecodeError", "EncodeError", "Header", "Message", "Request", "Response", "Struct",
    "UnsupportedVersionError", "kafka_message", "kafka_struct", "Versions", "CachedArray",
]
