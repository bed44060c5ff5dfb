"""What the tests share and are not tests themselves: program builders and drivers, the two cores
side by side (`dual`), tables of inputs and raise sites, and the scripts the tests run in other
processes (workers, the 1.1.3 comparisons).

The test directory is on `sys.path` (pytest puts it there; the Ray workers get it on PYTHONPATH),
so these are imported as `support.<name>`. A script run by its path has its own folder on the path
instead: it puts the test directory first when it imports from here (`durable_worker`).
"""
