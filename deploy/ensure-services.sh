#!/usr/bin/env bash
# Start the local services the tests use when they are not running: PostgreSQL on 127.0.0.1:5432 and Redis on
# 127.0.0.1:6379. On a machine without them installed, say so (the PostgreSQL tests then skip, naming why).
set -uo pipefail
if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "starting PostgreSQL" >&2
    if command -v pg_ctlcluster >/dev/null 2>&1; then
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
    fi
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  pg_isready -h 127.0.0.1 -p 5432 >&2 || echo "PostgreSQL is not running: its tests will skip" >&2
else
  echo "PostgreSQL is not installed: its tests will skip" >&2
fi
if command -v redis-cli >/dev/null 2>&1; then
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "starting Redis" >&2
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.5; done
  fi
else
  echo "Redis is not installed" >&2
fi
exit 0
