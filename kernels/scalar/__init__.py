"""Scalar (per-element) functions shared by the CPU loops and the CUDA kernels."""
