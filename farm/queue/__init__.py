"""The broker side of farm mode: the Celery app and its queues (celery_app), announcing jobs (announce), and the
operators' view of the fleet (overview).

Submission lives in farm.submit and the worker's Celery runtime in farm.worker.celery (with its sweeper in
farm.worker.sweeper). Importing this package imports none of them, so `farm status` stays fast.
"""
