# threadline service image: `docker compose up` builds it (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Commands (run_command, acceptance checks) run in a bubblewrap sandbox (agent/tools/sandbox.py):
# the service (uid 1000) starts an unprivileged `bwrap` with its own user, pid, network and mount
# namespaces per command; prlimit, setpriv and unshare come with util-linux. Docker's defaults
# refuse that, so the container needs (docker-compose.yml sets them):
#   security_opt: seccomp=unconfined     the default seccomp profile blocks unshare(CLONE_NEWUSER)
#                                        (or use a profile that allows clone/unshare/mount)
#                 apparmor=unconfined    on AppArmor hosts (Ubuntu), whose docker-default profile
#                                        forbids mount
#                 systempaths=unconfined Docker's masked /proc paths make the kernel refuse the
#                                        sandbox its own /proc ("Can't mount proc": EPERM)
# Without them the service still starts, logs why, shows "sandbox": "unavailable" in /info and
# refuses commands; THREADLINE_SANDBOX=off runs them unconfined instead (logged as a warning).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Only what the distribution needs, so edits to tests or docs don't invalidate the install layer.
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY api ./api
RUN pip install .

# Workspaces and (without DATABASE_URL) the embedded database live in the data directory; a
# named volume mounted here starts out owned by the service user.
RUN useradd --create-home --uid 1000 threadline \
    && mkdir -p /data \
    && chown threadline:threadline /data
USER threadline
# The image listens on every interface, so it needs authentication: built-in API keys. Create the
# first key once the database is up (see the README's "Securing it"):
#   docker compose exec threadline threadline keys create --identity you
# THREADLINE_ALLOWED_HOSTS names the Host headers served (against DNS rebinding).
ENV THREADLINE_DATA_DIR=/data \
    THREADLINE_AUTH=keys \
    THREADLINE_ALLOWED_HOSTS='["localhost", "127.0.0.1", "::1"]'
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ok', timeout=2)"]
CMD ["threadline", "serve", "--host", "0.0.0.0", "--port", "8000"]
