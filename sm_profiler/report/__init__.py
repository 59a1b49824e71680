"""Reports over a decoded trace: statistics and their text table, coverage against CUPTI, and
the SQL tables. May import trace/, wire/ and the basics; never export/ or the CLI."""
