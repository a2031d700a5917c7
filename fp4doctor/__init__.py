"""fp4doctor: which NVFP4 GEMM backend really works on this host, and how to switch it on."""

__version__ = "0.1.0"
