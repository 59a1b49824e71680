"""Reports over a trace: statistics and their text table, coverage against CUPTI, what to fix
first (advise.py), SQL tables. May import trace/, wire/, basics; never export/ or the CLI."""
