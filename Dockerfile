FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_ENV=production
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY core ./core
COPY accounts ./accounts
COPY inventory ./inventory
COPY contracts ./contracts
COPY leasing ./leasing
COPY billing ./billing
COPY economics ./economics
COPY webhooks ./webhooks
COPY cardhour_cli ./cardhour_cli
COPY templates ./templates
COPY manage.py ./
RUN pip install --no-cache-dir . \
    && SECRET_KEY=build ALLOWED_HOSTS=build DATABASE_URL=postgres://build@localhost/build \
       METRICS_TOKEN=build CACHE_URL=redis://build:6379/1 \
       python manage.py collectstatic --noinput
RUN useradd --system --uid 10001 cardhour && mkdir -p /app/var && chown -R cardhour /app/var
USER cardhour
EXPOSE 8000
# No gunicorn access log: core.middleware writes one JSON line per request (with its request id).
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
