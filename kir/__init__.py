"""KIR: a typed, hardware-explicit kernel IR."""

__version__ = "0.1.0"
