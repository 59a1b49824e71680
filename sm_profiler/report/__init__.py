"""Reports over a trace: statistics and their text table, auto mode's report (auto_report.py),
coverage against CUPTI, what to fix first (advise.py), SQL tables. May import trace/, wire/,
basics; never export/, auto_mode/ or the CLI."""


def __getattr__(name: str):  # a submodule loads on first use (moved.submodule)
    from ..moved import submodule

    return submodule(__name__, name)
