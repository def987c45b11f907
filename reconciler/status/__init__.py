"""Status of the reconciled resources: the files of the status branch, their reading, and the reports
built from them (pure; the git side is :mod:`reconciler.source.status_store`). Import each name from
the module that defines it.
"""
