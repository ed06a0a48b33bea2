"""Contract tests: the obligations of every :class:`l0mem.backends.Backend`.

Every test here runs once per backend set-up in :data:`tests.contracts.cases.CASES`
(Level Zero on the simulator in both context layouts, SYCL on the OpenCL CPU
device and on two of its sub-devices), each opened through
:func:`l0mem.backends.open_backend` as the CLI opens it. A new backend gets the
whole suite by adding a :class:`~tests.contracts.cases.Case` (and, where it can
tell, the witnesses that say which copy route ran and whether memory is held).
"""
