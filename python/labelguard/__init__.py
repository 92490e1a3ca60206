"""labelguard: validates PyTorch loss-kernel labels before the CUDA kernels run (placeholder; the Python API replaces this file)."""
