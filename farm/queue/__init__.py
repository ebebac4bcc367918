"""The broker side of farm mode: the Celery app and its queues (celery_app), announcing jobs (announce), and the
operators' view of the fleet (overview).

Submission lives in farm.submit and the worker's Celery runtime in farm.worker.celery (with its sweeper in
farm.worker.sweeper); `from farm.queue import submit_sweep` keeps working.
"""

from farm.submit import FROM_SETTINGS, submit_sweep

__all__ = ["FROM_SETTINGS", "submit_sweep"]
