"""The wire format and the files that carry it: the buffer layout (format.py), capture files
(capture.py), torch.profiler's JSON (torch_trace.py), and auto mode's buffer, areas, steps and
file (auto_*.py). Imports only the top-level basics."""


def __getattr__(name: str):  # a submodule loads on first use (moved.submodule)
    from ..moved import submodule

    return submodule(__name__, name)
