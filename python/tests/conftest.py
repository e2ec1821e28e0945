import importlib.util

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def have_gpu():
    if not HAVE_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
needs_gpu = pytest.mark.skipif(not have_gpu(), reason="needs PyTorch with a CUDA GPU")
