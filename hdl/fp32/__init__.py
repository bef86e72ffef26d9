"""Pipelined IEEE 754 binary32 datapath cores (bit-exact with :mod:`gpurtl.golden.fp32`)."""
