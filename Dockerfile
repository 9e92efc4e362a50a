# threadline service image: `docker compose up` builds it (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

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
ENV THREADLINE_DATA_DIR=/data
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ok', timeout=2)"]
CMD ["threadline", "serve", "--host", "0.0.0.0", "--port", "8000"]
