"""Kernel tests run under Triton's CPU interpreter: the variable must be set before triton is first imported."""

import os

os.environ["TRITON_INTERPRET"] = "1"
