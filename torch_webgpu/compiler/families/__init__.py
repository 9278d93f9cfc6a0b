"""The partitioner's op families: each matches a pattern of aten nodes that the kernel library runs as
one op (its roles, launch and tuning candidates), see partition.py for the driver."""
