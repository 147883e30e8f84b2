FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
# torch==2.13.0 from PyPI's CPU index keeps the image small; a GPU worker image swaps in a CUDA build.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt
COPY . .
# Production mode, so whitenoise writes the hashed, compressed files and staticfiles/staticfiles.json
# that production pages need. The key and host exist for this command only: a random key that no
# one will see again (production refuses published keys), and a host no request will carry.
RUN DJANGO_MODE=production DJANGO_ALLOWED_HOSTS=build.invalid \
    DJANGO_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2"]
