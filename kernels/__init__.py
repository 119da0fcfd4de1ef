"""gpu_engine.kernels: per-element logic written once, compiled for the CPU (numba njit) and CUDA.

A leaf package: it imports numpy and numba only, never other gpu_engine modules. Entry points take
Arrow-layout buffers as NumPy arrays (run on the CPU) or ``__cuda_array_interface__`` arrays (run on
the device, results stay there).
"""
