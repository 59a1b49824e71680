"""Recording on the device: the PTX every front end shares (ptx.py), the Triton and Gluon ops,
the CUDA C++ headers, launch slots, clock samples and occupancy queries.
May import wire/ and the top-level basics (errors, paths, units); nothing that reads a trace."""
