import contextlib
import importlib.util
import os
import random

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None

SEED_VARIABLE = "EVOSDPA_TEST_SEED"


def have_gpu():
    if not HAVE_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
needs_gpu = pytest.mark.skipif(not have_gpu(), reason="needs PyTorch with a CUDA GPU")


def skip_unless_runs(kernel, what, **features):
    """Skip the test when `kernel` (not "auto") refuses a small fp16 call with `features` (keyword arguments
    of evosdpa.attention; `what` names them in the reason) on this GPU."""
    if kernel == "auto":
        return
    import torch

    import evosdpa
    x = torch.ones(1, 2, 128, 64, dtype=torch.float16, device="cuda")
    try:
        evosdpa.attention(x, x, x, kernel=kernel, **features)
    except (ValueError, evosdpa.EvosdpaError) as e:
        pytest.skip(f"kernel {kernel} does not run {what} on this GPU: {e}")


@contextlib.contextmanager
def launched_kernels():
    """Yield a list that collects, for each launch of the library (forward or backward) while the block runs,
    the kernel evosdpa_supports names for that launch's own params (workspace included), and the
    workspace's size: (name, bytes)."""
    from evosdpa import _lib

    ran = []

    def spy(launch, query):
        def run(params, kernel, stream):
            ran.append((query(params, kernel)[2], params.workspace_size))
            return launch(params, kernel, stream)
        return run

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_lib, "forward", spy(_lib.forward, _lib.supports))
        mp.setattr(_lib, "backward", spy(_lib.backward, _lib.supports_backward))
        yield ran


def capture_graph(step):
    """A CUDA graph of step() and what the captured call returned: warmed up on a side stream first, as
    torch.cuda.graphs asks."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    return graph, outputs


def seed_for_test():
    """EVOSDPA_TEST_SEED when set (to replay a failure), else a fresh random seed."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    return int(value, 0) if value else random.SystemRandom().randrange(2**32)


class Rng:
    """Every random input of a GPU test: a torch.Generator on the GPU seeded with `seed`."""

    def __init__(self, seed, device="cuda"):
        import torch
        self.seed = seed
        self.device = device
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)

    def randn(self, *shape, dtype, std=1.0):
        """N(0, std^2) rounded to dtype, never exactly zero (a zero would hide a read of the wrong element)."""
        import torch
        x = torch.randn(shape, generator=self.generator, device=self.device, dtype=torch.float32) * std
        x = x.to(dtype)
        return torch.where(x == 0, torch.full_like(x, 2.0**-10), x)

    def randn_like(self, t, std=1.0):
        return self.randn(*t.shape, dtype=t.dtype, std=std)

    def __repr__(self):
        return f"{SEED_VARIABLE}={self.seed}"


@pytest.fixture
def rng(request):
    """A seeded generator for the test's inputs; a failing test's report names the seed to replay it."""
    generator = Rng(seed_for_test())
    request.node.evosdpa_seed = generator.seed
    return generator


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    seed = getattr(item, "evosdpa_seed", None)
    if seed is not None and report.failed:
        report.sections.append(("evosdpa inputs", f"random inputs from seed {seed}; replay with "
                                                  f"{SEED_VARIABLE}={seed} pytest '{item.nodeid}'"))
