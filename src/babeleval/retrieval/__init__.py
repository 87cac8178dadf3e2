"""The retrieval side (MINERS): embedders behind one interface, an on-disk embedding cache,
nearest-neighbour search (exact in blocks, or an hnswlib index), and the metrics the
retrieval tasks report. Importing this package imports no JAX; exact search does, when
first called."""
